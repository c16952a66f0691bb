import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../log/logger.ts';
import type { FilterBuildContext, FilterRequest, HttpFilter } from '../proxy/filters/http-filter.ts';
import { JWT_METADATA } from './jwt-filter.ts';
import { rbacFilterFactory } from './rbac-filter.ts';

const logger = createLogger('rbac-test', { level: 'silent' });

function build(routeOptions: Record<string, unknown> | undefined, virtualHostOptions: Record<string, unknown> | undefined): HttpFilter | undefined {
  const context = { routeOptions, virtualHostOptions, namespace: 'default', virtualHost: 'default/vs', route: 'r', snapshot: { generation: 1, resources: new Map(), statuses: [], diagnostics: [] }, logger } as unknown as FilterBuildContext;
  return rbacFilterFactory.create(context) as HttpFilter | undefined;
}

function request(claims: Record<string, Record<string, unknown>> | undefined, url = '/api/pets', method = 'GET'): FilterRequest {
  const metadata = new Map<string, unknown>();
  if (claims) metadata.set(JWT_METADATA, claims);
  return { req: { url, method, headers: {} } as unknown as IncomingMessage, ctx: { headers: {} } as never, method, path: url, remoteAddress: '127.0.0.1', metadata, body: undefined, readBody: async () => Buffer.alloc(0), bodyPartial: false, signal: new AbortController().signal, clearRouteCache: () => undefined, responseHeaders: [] };
}

const denied = { status: 403, code: 'GH_RBAC_DENIED', body: 'RBAC: access denied' };

describe('RBAC on JWT claims (Gloo ExtensionSettings)', () => {
  // The access-control guide's shape: a service account may GET /api/pets and nothing else.
  const guide = {
    rbac: {
      policies: {
        viewer: {
          principals: [{ jwtPrincipal: { claims: { sub: 'system:serviceaccount:default:svc-a' } } }],
          permissions: { pathPrefix: '/api/pets', methods: ['GET'] },
        },
      },
    },
  };

  it('allows a principal whose claims match within its permissions (path prefix, methods); denies everything else with 403', () => {
    const f = build(undefined, guide)!;
    const sa = { kube: { sub: 'system:serviceaccount:default:svc-a' } };
    expect(f.onRequest!(request(sa))).toBeUndefined();
    expect(f.onRequest!(request(sa, '/api/pets/1?x=y'))).toBeUndefined();
    expect(f.onRequest!(request(sa, '/api/pets', 'POST'))).toMatchObject(denied);
    expect(f.onRequest!(request(sa, '/api/stores'))).toMatchObject(denied);
    expect(f.onRequest!(request({ kube: { sub: 'system:serviceaccount:default:svc-b' } }))).toMatchObject(denied);
    expect(f.onRequest!(request(undefined))).toMatchObject(denied);
  });

  it('ANDs the claims of a principal, ORs principals and policies, and honours provider', () => {
    const f = build(undefined, {
      rbac: {
        policies: {
          ops: { principals: [{ jwtPrincipal: { claims: { team: 'ops', org: 'solo.io' }, provider: 'vhost' } }] },
          finance: { principals: [{ jwtPrincipal: { claims: { team: 'finance' } } }, { jwtPrincipal: { claims: { sub: 'root' } } }] },
        },
      },
    })!;
    expect(f.onRequest!(request({ vhost: { team: 'ops', org: 'solo.io' } }))).toBeUndefined();
    expect(f.onRequest!(request({ vhost: { team: 'ops' } }))).toMatchObject(denied);
    expect(f.onRequest!(request({ route: { team: 'ops', org: 'solo.io' } }))).toMatchObject(denied);
    expect(f.onRequest!(request({ route: { team: 'finance' } }))).toBeUndefined();
    expect(f.onRequest!(request({ route: { sub: 'root' } }))).toBeUndefined();
  });

  it('matchers: BOOLEAN, LIST_CONTAINS, REGEX_MATCH (full match), and nested claims with nestedClaimDelimiter', () => {
    const policy = (matcher: string, claims: Record<string, string>, extra = {}) => build(undefined, { rbac: { policies: { p: { principals: [{ jwtPrincipal: { claims, matcher } }], ...extra } } } })!;
    expect(policy('BOOLEAN', { admin: 'true' }).onRequest!(request({ p: { admin: true } }))).toBeUndefined();
    expect(policy('BOOLEAN', { admin: 'true' }).onRequest!(request({ p: { admin: 'true' } }))).toMatchObject(denied);
    expect(policy('LIST_CONTAINS', { groups: 'dev' }).onRequest!(request({ p: { groups: ['ops', 'dev'] } }))).toBeUndefined();
    expect(policy('LIST_CONTAINS', { groups: 'dev' }).onRequest!(request({ p: { groups: 'dev' } }))).toMatchObject(denied);
    expect(policy('REGEX_MATCH', { email: '.*@solo\\.io' }).onRequest!(request({ p: { email: 'a@solo.io' } }))).toBeUndefined();
    expect(policy('REGEX_MATCH', { email: '.*@solo\\.io' }).onRequest!(request({ p: { email: 'a@solo.io.evil' } }))).toMatchObject(denied);
    expect(policy('EXACT_STRING', { 'llms.openai': 'gpt-4o' }, { nestedClaimDelimiter: '.' }).onRequest!(request({ p: { llms: { openai: 'gpt-4o' } } }))).toBeUndefined();
    // Without a delimiter the name is one claim.
    expect(policy('EXACT_STRING', { 'llms.openai': 'gpt-4o' }).onRequest!(request({ p: { llms: { openai: 'gpt-4o' } } }))).toMatchObject(denied);
  });

  it('route settings replace the host\'s; disable turns RBAC off for the route', () => {
    const route = { rbac: { policies: { r: { principals: [{ jwtPrincipal: { claims: { team: 'finance' } } }] } } } };
    const f = build(route, guide)!;
    expect(f.onRequest!(request({ p: { team: 'finance' } }, '/other', 'POST'))).toBeUndefined();
    expect(build({ rbac: { disable: true } }, guide)).toBeUndefined();
    expect(build(undefined, undefined)).toBeUndefined();
  });

  it('load-time checks: bad regex and BOOLEAN values are errors, an empty policy set a warning', () => {
    const at = (path: (string | number)[], code: string, message: string, severity: 'error' | 'warning' = 'error') => ({ path: path.join('.'), code, message, severity });
    const out = rbacFilterFactory.check!({ rbac: { policies: { a: { principals: [{ jwtPrincipal: { claims: { x: '(' }, matcher: 'REGEX_MATCH' } }, { jwtPrincipal: { claims: { y: 'yes' }, matcher: 'BOOLEAN' } }] } } } }, at as never, ['o']);
    expect(out.map((d) => [d.path, d.severity])).toEqual([
      ['o.rbac.policies.a.principals.0.jwtPrincipal.claims.x', 'error'],
      ['o.rbac.policies.a.principals.1.jwtPrincipal.claims.y', 'error'],
    ]);
    expect(rbacFilterFactory.check!({ rbac: {} }, at as never, ['o']).map((d) => d.severity)).toEqual(['warning']);
  });
});
