import type { Diagnostic } from '../config/diagnostic.ts';
import { refKey, type Resource } from '../config/resource.ts';
import type { CheckContext, ResourceChecks } from '../config/store.ts';
import { compileApiKeyAuth, secretSource, selectSecrets } from './api-key/api-key-step.ts';
import { compileBasicAuth } from './basic/basic-auth-step.ts';
import { namesIn, parseBoolExpr, type BoolExpr, type BoolExprError } from './boolean-expr.ts';
import { stepName } from './build-step.ts';
import { ExtAuthCodes } from './codes.ts';
import { parseAddress } from './grpc/check-client.ts';
import { compileHmacAuth } from './hmac/hmac-step.ts';
import { compileLdap } from './ldap/ldap-step.ts';
import { opaDataUrl } from './opa/opa-step.ts';
import { checkOAuth2 } from './oauth2/check-oauth2.ts';

/**
 * Load-time checks of an AuthConfig (the {@link ResourceChecks} hook): what can be known
 * without the plugin directory. A failure rejects the resource with the field and cause,
 * so a bad update keeps the last accepted version serving (SPEC 2.4, 5).
 */
export function checkAuthConfig(resource: Resource<'AuthConfig'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  resource.spec.configs.forEach((step, index) => {
    const at = ['spec', 'configs', index];
    if (step.basicAuth) {
      for (const problem of compileBasicAuth(step.basicAuth).problems) out.push(ctx.at([...at, 'basicAuth', ...problem.path], ExtAuthCodes.STEP_BUILD, problem.message));
    }
    for (const [name, ref] of Object.entries(step.pluginAuth?.secretRefs ?? {})) {
      const secret = ctx.resources.get(refKey('Secret', ref, resource.namespace)) as Resource<'Secret'> | undefined;
      // A missing Secret is reported by the reference check; a missing key only here.
      if (secret && !Object.hasOwn(secret.spec.data, ref.key)) {
        out.push(ctx.at([...at, 'pluginAuth', 'secretRefs', name, 'key'], ExtAuthCodes.STEP_BUILD, `Secret ${secret.namespace}/${secret.name} has no key "${ref.key}" (it has: ${Object.keys(secret.spec.data).sort().join(', ') || 'none'})`));
      }
    }
    if (step.passThroughAuth?.grpc && !parseAddress(step.passThroughAuth.grpc.address)) {
      out.push(ctx.at([...at, 'passThroughAuth', 'grpc', 'address'], ExtAuthCodes.STEP_BUILD, 'must be host:port with a port from 1 to 65535'));
    }
    if (step.apiKeyAuth) {
      const selected = selectSecrets(step.apiKeyAuth, resource.namespace, secretSource(ctx.resources));
      const { problems } = compileApiKeyAuth(step.apiKeyAuth, selected.secrets);
      for (const problem of [...selected.problems, ...problems]) out.push(ctx.at([...at, 'apiKeyAuth', ...problem.path], ExtAuthCodes.STEP_BUILD, problem.message, problem.severity));
    }
    const ldapSpec = step.ldap ?? step.ldapInternal;
    if (ldapSpec) {
      const kind = step.ldap ? 'ldap' : 'ldapInternal';
      const lookup = step.ldap?.groupLookupSettings;
      const ref = lookup?.credentialsSecretRef;
      let credentials: { username: string; password: string } | undefined;
      if (ref) {
        const secret = ctx.resources.get(refKey('Secret', ref, resource.namespace)) as Resource<'Secret'> | undefined;
        // A missing Secret is reported by the reference check.
        if (secret && (!secret.spec.data.username || !secret.spec.data.password)) {
          out.push(ctx.at([...at, 'ldap', 'groupLookupSettings', 'credentialsSecretRef'], ExtAuthCodes.STEP_BUILD, `Secret ${secret.namespace}/${secret.name} needs the keys "username" (the service account's DN) and "password" (glooctl create secret authcredentials)`));
        } else if (secret) credentials = { username: secret.spec.data.username!, password: secret.spec.data.password! };
        else credentials = { username: '-', password: '-' };
      } else if (step.ldapInternal) {
        const inline = step.ldapInternal.groupLookupSettings;
        if (inline) {
          credentials = inline;
          out.push(ctx.at([...at, 'ldapInternal', 'groupLookupSettings', 'password'], ExtAuthCodes.STEP_BUILD, 'the service account password is written in the AuthConfig; prefer ldap with groupLookupSettings.credentialsSecretRef (a Secret)', 'warning'));
        }
      }
      for (const problem of compileLdap(ldapSpec, credentials).problems) out.push(ctx.at([...at, kind, ...problem.path], ExtAuthCodes.STEP_BUILD, problem.message, problem.severity));
    }
    if (step.hmacAuth) {
      const source = secretSource(ctx.resources);
      // Only what the Secrets hold; a missing Secret is reported by the reference check.
      const { problems } = compileHmacAuth(step.hmacAuth, resource.namespace, (ref) => source.byRef(ref)?.data ?? { username: '-', password: '-' });
      for (const problem of problems) out.push(ctx.at([...at, 'hmacAuth', ...problem.path], ExtAuthCodes.STEP_BUILD, problem.message));
    }
    const opa = step.opaAuth ?? step.opaServerAuth;
    if (opa) {
      const kind = step.opaAuth ? 'opaAuth' : 'opaServerAuth';
      if (opa.options?.returnDecisionReason) {
        out.push(ctx.at([...at, kind, 'options', 'returnDecisionReason'], ExtAuthCodes.STEP_BUILD, 'accepted but not honoured: the decision reason is not written to dynamic metadata (Gloo deprecates it too)', 'warning'));
      }
      if (step.opaServerAuth && !opaDataUrl(step.opaServerAuth.serverAddr, step.opaServerAuth.package, step.opaServerAuth.ruleName)) {
        out.push(ctx.at([...at, 'opaServerAuth'], ExtAuthCodes.STEP_BUILD, 'serverAddr must be host:port or an http(s) URL, package dot-separated Rego names, ruleName slash-separated names'));
      }
    }
    if (step.oauth2) {
      for (const problem of checkOAuth2(step.oauth2 as Record<string, unknown>, resource.namespace, ctx.resources)) out.push(ctx.at([...at, 'oauth2', ...problem.path], ExtAuthCodes.STEP_BUILD, problem.message, problem.severity));
    }
    const http = step.passThroughAuth?.http;
    if (http) {
      const url = URL.parse(http.url);
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) {
        out.push(ctx.at([...at, 'passThroughAuth', 'http', 'url'], ExtAuthCodes.STEP_BUILD, 'must be an absolute http(s) URL without credentials'));
      }
    }
  });
  if (resource.spec.booleanExpr !== undefined) out.push(...checkBooleanExpr(resource, ctx));
  return out;
}

/** `booleanExpr`: it parses, names only steps of this AuthConfig, and names them unambiguously. */
function checkBooleanExpr(resource: Resource<'AuthConfig'>, ctx: CheckContext): Diagnostic[] {
  const at = ['spec', 'booleanExpr'];
  let expr: BoolExpr;
  try {
    expr = parseBoolExpr(resource.spec.booleanExpr!);
  } catch (error) {
    return [ctx.at(at, ExtAuthCodes.STEP_BUILD, `does not parse at character ${(error as BoolExprError).at}: ${(error as Error).message}`)];
  }
  const names = resource.spec.configs.map((step, index) => stepName(step, index));
  const out: Diagnostic[] = [];
  const duplicate = names.find((name, index) => names.indexOf(name) !== index);
  if (duplicate !== undefined) out.push(ctx.at(at, ExtAuthCodes.STEP_BUILD, `two steps are named "${duplicate}": give each step a unique name for booleanExpr`));
  const used = namesIn(expr);
  for (const name of used) {
    if (!names.includes(name)) out.push(ctx.at(at, ExtAuthCodes.STEP_BUILD, `names step "${name}", which this AuthConfig does not have (its steps: ${names.join(', ')})`));
  }
  names.forEach((name, index) => {
    if (!used.includes(name)) out.push(ctx.at(['spec', 'configs', index], ExtAuthCodes.STEP_BUILD, `step "${name}" is not named in booleanExpr, so it never runs`, 'warning'));
  });
  return out;
}

/** The checks to give a ConfigStore / ConfigLoader that serves AuthConfigs. */
export const extAuthChecks: ResourceChecks = { AuthConfig: checkAuthConfig };
