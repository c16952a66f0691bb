import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface WebhookSignatureConfig {
  /** Header with the signature, `sha256=<hex>` (GitHub's `x-hub-signature-256`). */
  Header: string;
  /** The `secretRefs` name of the shared secret. */
  Secret: string;
}

type Key = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
const encoder = new TextEncoder();

function hex(bytes: string): Uint8Array | undefined {
  if (!/^(?:[0-9a-fA-F]{2})+$/.test(bytes)) return undefined;
  const out = new Uint8Array(bytes.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(bytes.slice(2 * i, 2 * i + 2), 16);
  return out;
}

class WebhookSignatureService implements AuthService {
  private key: Key | undefined;
  private readonly config: WebhookSignatureConfig;

  constructor(config: WebhookSignatureConfig) {
    this.config = config;
  }

  async Start(ctx: Context): Promise<void> {
    const secret = ctx.secrets[this.config.Secret];
    if (secret === undefined) throw new Error(`secretRefs has no ${this.config.Secret} (config.Secret)`);
    this.key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  }

  async Authorize(_ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const http = request.CheckRequest.attributes.request.http;
    const header = http.headers[this.config.Header.toLowerCase()] ?? '';
    const signature = header.startsWith('sha256=') ? hex(header.slice(7)) : undefined;
    if (!signature) return DeniedResponse(401, {}, 'missing or malformed signature');
    // The exact bytes: raw_body (packAsBytes) or, failing that, the UTF-8 body.
    const body = http.raw_body instanceof Uint8Array ? http.raw_body : encoder.encode(http.body ?? '');
    if (http.headers['x-envoy-auth-partial-body'] === 'true') return DeniedResponse(413, {}, 'the whole body is needed to check its signature');
    // verify compares in constant time (the host's native HMAC).
    const valid = await crypto.subtle.verify('HMAC', this.key!, signature, body);
    return valid ? AuthorizedResponse() : DeniedResponse(401, {}, 'bad signature');
  }
}

/** The reference webhook plugin; build with `gatehouse-plugin build src/index.ts --name WebhookSignature`. */
export const WebhookSignature: ExtAuthPlugin = {
  NewConfigInstance(): WebhookSignatureConfig {
    return { Header: 'x-hub-signature-256', Secret: 'WebhookSecret' };
  },
  GetAuthService(_ctx, config) {
    return new WebhookSignatureService(config as WebhookSignatureConfig);
  },
};
