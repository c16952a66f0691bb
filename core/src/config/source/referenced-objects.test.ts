import { describe, expect, it } from 'vitest';
import type { ManifestDocument } from '../manifest.ts';
import { referencedObjects } from './kube.ts';

type KubeObject = Parameters<ReturnType<typeof referencedObjects>['wants']>[1];

const doc = (value: object): ManifestDocument => ({ file: 'kube', index: 0, line: 1, value, lineOf: () => 1 });
const secret = (namespace: string, name: string, extra: { labels?: Record<string, string>; annotations?: Record<string, string>; type?: string } = {}): KubeObject =>
  ({ apiVersion: 'v1', kind: 'Secret', type: extra.type ?? 'extauth.solo.io/apikey', metadata: { name, namespace, ...(extra.labels ? { labels: extra.labels } : {}), ...(extra.annotations ? { annotations: extra.annotations } : {}) } }) as KubeObject;

describe('referencedObjects: which Secrets the kube source keeps (docs/tenancy.md)', () => {
  const documents = [
    doc({ kind: 'VirtualService', metadata: { name: 'vs', namespace: 'tenant' }, spec: { virtualHost: { options: { headerManipulation: { requestHeadersToAdd: [{ headerSecretRef: { name: 'db', namespace: 'vault' } }, { headerSecretRef: { name: 'own' } }] } } } } }),
    doc({ kind: 'AuthConfig', metadata: { name: 'keys', namespace: 'tenant' }, spec: { configs: [{ apiKeyAuth: { labelSelector: { team: 'a' } } }, { apiKeyAuth: { labelSelector: {} } }] } }),
  ];

  it('keeps a Secret of another namespace only when it grants the referring one, under granted', () => {
    const wanted = referencedObjects(documents);
    expect(wanted.wants('Secret', secret('tenant', 'own'))).toBe(true);
    expect(wanted.wants('Secret', secret('vault', 'db'))).toBe(false);
    expect(wanted.wants('Secret', secret('vault', 'db', { annotations: { 'gatehouse.dev/allow-references-from': 'other, tenant' } }))).toBe(true);
    expect(wanted.wants('Secret', secret('vault', 'db', { annotations: { 'gatehouse.dev/allow-references-from': '*' } }))).toBe(true);
    expect(referencedObjects(documents, 'none').wants('Secret', secret('vault', 'db', { annotations: { 'gatehouse.dev/allow-references-from': '*' } }))).toBe(false);
    expect(referencedObjects(documents, 'any').wants('Secret', secret('vault', 'db'))).toBe(true);
  });

  it("selects API key Secrets by label in the AuthConfig's namespace (or granting it); an empty selector selects nothing", () => {
    const wanted = referencedObjects(documents);
    expect(wanted.wants('Secret', secret('tenant', 'k1', { labels: { team: 'a' } }))).toBe(true);
    expect(wanted.wants('Secret', secret('vault', 'k2', { labels: { team: 'a' } }))).toBe(false);
    expect(wanted.wants('Secret', secret('vault', 'k3', { labels: { team: 'a' }, annotations: { 'gatehouse.dev/allow-references-from': 'tenant' } }))).toBe(true);
    expect(wanted.wants('Secret', secret('tenant', 'password', { labels: { app: 'db' } }))).toBe(false);
    expect(wanted.wants('Secret', secret('tenant', 'opaque', { labels: { team: 'a' }, type: 'Opaque' }))).toBe(false);
  });
});
