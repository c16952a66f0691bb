import type { MockResolverSpec } from '../../config/schema/graphql-api.ts';
import { FieldErrorCodes, fieldError } from '../compile/errors.ts';
import type { FieldResolver } from './types.ts';

/** `mockResolver`: a fixed value (`syncResponse`) or a fixed field error (`errorResponse`). */
export function mockResolver(spec: MockResolverSpec): FieldResolver {
  if (spec.errorResponse !== undefined) {
    const message = spec.errorResponse;
    return () => {
      throw fieldError(FieldErrorCodes.MOCK_ERROR, message);
    };
  }
  const value = spec.syncResponse === undefined ? null : spec.syncResponse;
  return () => value;
}
