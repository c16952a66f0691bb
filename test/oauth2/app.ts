/** The app of the OIDC tests: an echo upstream behind a Dex-guide-shaped OIDC AuthConfig, and a login through the provider's forms. */
import { expect } from 'vitest';
import { manifests } from '../support/config-dir.ts';
import type { Browser, Step } from './browser.ts';
import { CLIENT, USER } from './provider.ts';

const APP = 'http://app.test';

/** The AuthConfig of these tests (Dex-guide shaped), with `extra` merged into oidcAuthorizationCode. */
export function oidcAuthConfig(issuer: string, extra: Record<string, unknown> = {}) {
  return {
    ...manifests.authConfig('oidc', [
      {
        oauth2: {
          oidcAuthorizationCode: {
            appUrl: `${APP}/`,
            callbackPath: '/callback',
            logoutPath: '/logout',
            clientId: CLIENT.id,
            clientSecretRef: { name: 'oauth', namespace: 'default' },
            issuerUrl: `${issuer}/`,
            scopes: ['email', 'profile', 'offline_access'],
            // oidc-provider issues refresh tokens for offline_access only after an explicit consent prompt.
            authEndpointQueryParams: { prompt: 'consent' },
            headers: { idTokenHeader: 'x-id-token', accessTokenHeader: 'authorization', useBearerSchemaForAuthorization: true },
            identityToken: { claimsToHeaders: [{ claim: 'email', header: 'x-email' }, { claim: 'sub', header: 'x-sub' }] },
            session: { cookieOptions: { notSecure: true }, cookie: { allowRefreshing: true } },
            ...extra,
          },
        },
      },
    ]),
    metadata: { name: 'oidc', namespace: 'default' },
  };
}

export function appFiles(echoPort: number, authConfig: object): Record<string, object | object[]> {
  return {
    'secret.yaml': { apiVersion: 'v1', kind: 'Secret', type: 'extauth.solo.io/oauth', metadata: { name: 'oauth', namespace: 'default' }, data: { 'client-secret': Buffer.from(CLIENT.secret).toString('base64') } },
    'app.yaml': [
      manifests.upstream('echo', [{ addr: '127.0.0.1', port: echoPort }]),
      manifests.virtualService('app', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }], options: { extauth: { configRef: { name: 'oidc', namespace: 'default' } } } }),
    ],
    'auth.yaml': authConfig,
  };
}

/** Logs in from `start` (an app URL): login form, consent form, callback; answers the steps after the callback. */
export async function login(browser: Browser, start: string): Promise<{ first: Step; steps: Step[] }> {
  const toLogin = await browser.follow(start);
  const first = toLogin[0]!;
  const loginPage = toLogin[toLogin.length - 1]!;
  expect(loginPage.reply.body, loginPage.url).toContain('Sign in');
  const afterLogin = await browser.submit(loginPage, { username: USER.name, password: USER.password });
  const consent = afterLogin[afterLogin.length - 1]!;
  expect(consent.reply.body, consent.url).toContain('Authorize');
  const steps = await browser.submit(consent, {});
  return { first, steps };
}

