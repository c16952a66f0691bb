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
  SocketAddressJson,
} from './types.ts';
export { AuthorizedResponse, ClientAddress, DeniedResponse, GrpcCode, UnauthenticatedResponse, UnauthorizedResponse } from './responses.ts';
