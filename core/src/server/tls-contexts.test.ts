import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { AnyResource } from '../config/resource.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { servesOnConnection, TlsContexts, type TlsBinding } from './tls-contexts.ts';

type Pair = { cert: string; key: string };

/** A self-signed P-256 certificate for `name` (openssl CLI); each call makes a new one. */
function certificate(dir: string, name: string): Pair {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.pem`), '-subj', `/CN=${name}`, '-days', '2', '-addext', `subjectAltName=DNS:${name}`], { stdio: 'ignore' });
  return { cert: readFileSync(join(dir, `${name}.pem`), 'utf8'), key: readFileSync(join(dir, `${name}.key`), 'utf8') };
}

/** A snapshot of `secrets` and TLS VirtualServices, one per name (its SNI domain): those of `uses` with the Secret it names, else one per Secret. */
function snapshot(secrets: Record<string, Pair & { ca?: string }>, uses: Record<string, string> = {}): ConfigSnapshot {
  const resources = new Map<string, AnyResource>();
  const base = (kind: string, name: string, version: string) => ({ kind, apiVersion: 'v1', name, namespace: 'default', key: `${kind}/default/${name}`, version, labels: {}, source: { file: '/dev/null', line: 1, index: 0 } });
  for (const [name, pair] of Object.entries(secrets)) {
    const data = { 'tls.crt': pair.cert, 'tls.key': pair.key, ...(pair.ca ? { 'ca.crt': pair.ca } : {}) };
    const secret = { ...base('Secret', name, pair.cert), spec: { type: 'kubernetes.io/tls', data } };
    resources.set(secret.key, secret as unknown as AnyResource);
  }
  for (const name of Object.keys(uses).length > 0 ? Object.keys(uses) : Object.keys(secrets)) {
    const vs = { ...base('VirtualService', name, name), spec: { sslConfig: { secretRef: { name: uses[name] ?? name }, sniDomains: [name] }, virtualHost: { domains: [name], routes: [] } } };
    resources.set(vs.key, vs as unknown as AnyResource);
  }
  return { generation: 1, resources, statuses: [], diagnostics: [] };
}

/** What the listener binds a connection with SNI `servername` made now to (./listen.ts). */
function connect(contexts: TlsContexts, servername: string): TlsBinding {
  const table = contexts.current;
  return { host: table.hostFor(servername), table, contexts };
}

describe('servesOnConnection (SPEC 3.2.1)', () => {
  let dir: string;
  let a: Pair;
  let a2: Pair;
  let b: Pair;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-tls-contexts-'));
    a = certificate(dir, 'a.test');
    a2 = certificate(dir, 'a.test');
    b = certificate(dir, 'b.test');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('a connection made before its VirtualService’s certificate rotated keeps serving it; another VirtualService’s connection still does not', () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a, 'b.test': b }));
    const toA = connect(contexts, 'a.test');
    const toB = connect(contexts, 'b.test');
    expect(servesOnConnection(toA, 'default/a.test')).toBe(true);
    expect(servesOnConnection(toB, 'default/a.test')).toBe(false);
    contexts.update(snapshot({ 'a.test': a2, 'b.test': b }));
    expect(servesOnConnection(toA, 'default/a.test')).toBe(true);
    expect(servesOnConnection(toA, 'default/b.test')).toBe(false);
    expect(servesOnConnection(toB, 'default/a.test')).toBe(false);
    expect(servesOnConnection(connect(contexts, 'a.test'), 'default/a.test')).toBe(true);
  });

  test('a policy that now demands more of the client (a client CA) is not served on a connection made without it: 421, the client reconnects', () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a }));
    const before = connect(contexts, 'a.test');
    contexts.update(snapshot({ 'a.test': { ...a2, ca: b.cert } }));
    expect(servesOnConnection(before, 'default/a.test')).toBe(false);
    expect(servesOnConnection(connect(contexts, 'a.test'), 'default/a.test')).toBe(true);
  });

  test('two VirtualServices sharing one Secret share connections (coalescing), before and after it rotates', () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ shared: a }, { 'a.test': 'shared', 'www.a.test': 'shared' }));
    const toA = connect(contexts, 'a.test');
    expect(servesOnConnection(toA, 'default/www.a.test')).toBe(true);
    contexts.update(snapshot({ shared: a2 }, { 'a.test': 'shared', 'www.a.test': 'shared' }));
    expect(servesOnConnection(toA, 'default/www.a.test')).toBe(true);
  });
});
