import { corsFilter } from './cors.ts';
import { faultFilter } from './fault.ts';
import { compressionFilter } from './compression.ts';
import { grpcWebFilter } from './grpc-web.ts';
import { bufferFilter } from './buffer.ts';
import { extauthFilter } from './extauth.ts';
import type { HttpFilterFactory } from './http-filter.ts';
import { transformationFilter } from '../../transform/filter.ts';
import { jwtFilterFactory } from '../../jwt/jwt-filter.ts';
import { rbacFilterFactory } from '../../jwt/rbac-filter.ts';
import { rateLimitFilter } from '../../ratelimit/filter.ts';

/**
 * Every filter factory, each compiled for every route (./README.md, "Adding a filter"). The
 * order here only breaks ties between filters of one stage; stages order the chain.
 */
export const FILTER_FACTORIES: readonly HttpFilterFactory[] = [
  faultFilter,
  corsFilter,
  extauthFilter,
  transformationFilter,
  jwtFilterFactory,
  rbacFilterFactory,
  rateLimitFilter,
  compressionFilter,
  grpcWebFilter,
  bufferFilter,
];
