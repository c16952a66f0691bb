export type {
  AuthorizationRequest,
  AuthorizationResponse,
  AuthService,
  CheckRequest,
  CheckResponse,
  Context,
  ExtAuthPlugin,
  HeaderValueOption,
  PluginLogger,
  PluginStore,
} from './types.ts';
export { AuthorizedResponse, DeniedResponse, GrpcCode, UnauthenticatedResponse, UnauthorizedResponse } from './responses.ts';
