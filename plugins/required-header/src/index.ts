import { AuthorizedResponse, UnauthorizedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface RequiredHeaderConfig {
  /** Header that must be present; names are case-insensitive. */
  RequiredHeader: string;
  /** Values that allow the request; compared exactly. */
  AllowedValues: string[];
}

/** Allows a request only when `RequiredHeader` carries one of `AllowedValues`, and says so upstream. */
class RequiredHeaderService implements AuthService {
  private readonly header: string;
  private readonly allowed: ReadonlySet<string>;

  constructor(config: RequiredHeaderConfig) {
    this.header = config.RequiredHeader.toLowerCase();
    this.allowed = new Set(config.AllowedValues);
  }

  Start(): void {}

  Authorize(_ctx: Context, request: AuthorizationRequest): AuthorizationResponse {
    const value = request.CheckRequest.attributes.request.http.headers[this.header];
    if (value !== undefined && this.allowed.has(value)) return AuthorizedResponse({ 'matched-allowed-headers': 'true' });
    return UnauthorizedResponse();
  }
}

/** The reference plugin (SPEC 5.2); build with `gatehouse-plugin build src/index.ts --name RequiredHeader`. */
export const RequiredHeader: ExtAuthPlugin = {
  NewConfigInstance(): RequiredHeaderConfig {
    return { RequiredHeader: '', AllowedValues: [] };
  },

  GetAuthService(ctx, config) {
    const { RequiredHeader: header, AllowedValues: values } = config as RequiredHeaderConfig;
    if (header === '') throw new Error('config.RequiredHeader is required: the name of the header to check');
    if (!values.every((value) => typeof value === 'string')) throw new Error('config.AllowedValues must be a list of strings');
    ctx.logger.info('RequiredHeader configured', { header, allowedValues: values.length });
    return new RequiredHeaderService({ RequiredHeader: header, AllowedValues: values });
  },
};
