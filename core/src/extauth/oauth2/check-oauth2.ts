import { refKey, type Resource } from '../../config/resource.ts';
import { compileAccessTokenValidation, compileOidc, type OAuth2Problem } from './compile.ts';

/** Load-time problems of an `oauth2` step (errors and not-honoured warnings), paths relative to `oauth2`. */
export function checkOAuth2(spec: Record<string, unknown>, namespace: string, resources: ReadonlyMap<string, unknown>): OAuth2Problem[] {
  const secrets = (ref: { name: string; namespace: string }) => (resources.get(refKey('Secret', ref, namespace)) as Resource<'Secret'> | undefined)?.spec.data;
  const isOidc = spec.oidcAuthorizationCode !== undefined || spec.oidc_authorization_code !== undefined;
  return isOidc ? compileOidc(spec, namespace, secrets).problems : compileAccessTokenValidation(spec, namespace, secrets).problems;
}
