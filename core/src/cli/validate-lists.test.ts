import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli } from '../../../test/oci/helpers/cli.ts';

/** What `kubectl get vs,us -n shop -o yaml` prints: a v1 List, the server's fields on every item. */
function kubectlList(items: object[]): string {
  const server = (name: string, i: number) => ({
    name,
    namespace: 'shop',
    uid: `5f0c${i}e8a-0000-4000-8000-00000000000${i}`,
    resourceVersion: String(1000 + i),
    generation: 1,
    creationTimestamp: '2026-11-26T12:00:00Z',
    managedFields: [{ manager: 'kubectl-client-side-apply', operation: 'Update', apiVersion: 'v1', time: '2026-11-26T12:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }],
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"apiVersion":"..."}' },
  });
  return stringify({
    apiVersion: 'v1',
    kind: 'List',
    metadata: { resourceVersion: '' },
    items: items.map((item, i) => {
      const o = item as { metadata: { name: string } };
      return { ...item, metadata: server(o.metadata.name, i), status: { state: 'Accepted', serving: 'current', reportedBy: 'gatehouse', observedGeneration: 1 } };
    }),
  });
}

const upstream = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 8080 }] } } };
const vs = (name: string, upstreamName: string) => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name },
  spec: { virtualHost: { domains: [`${name}.test`], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: upstreamName, namespace: 'shop' } } } }] } },
});

describe('gatehouse validate reads `kubectl get -o yaml` Lists (issue 27 item 9)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-validate-list-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('validates each item of a List as a resource, with the server fields kubectl prints', async () => {
    const file = join(dir, 'list.yaml');
    await writeFile(file, kubectlList([upstream, vs('shop', 'echo')]));
    const { code, stdout, stderr } = await runCli('gatehouse', ['validate', file]);
    expect(stderr).toBe('');
    expect(stdout).toContain('Accepted Upstream shop/echo');
    expect(stdout).toContain('Accepted VirtualService shop/shop');
    expect(stdout).toContain('2 resources: 2 accepted');
    expect(code).toBe(0);
  });

  it('reports a bad item with the line of the item inside the List, and exits 1', async () => {
    const file = join(dir, 'bad-list.yaml');
    const text = kubectlList([upstream, vs('shop', 'echo'), { ...vs('broken', 'echo'), spec: { virtualHost: { domains: 'not-a-list' } } }]);
    await writeFile(file, text);
    const { code, stdout } = await runCli('gatehouse', ['validate', file]);
    expect(code).toBe(1);
    expect(stdout).toMatch(/Rejected VirtualService shop\/broken \(.*bad-list\.yaml:(\d+)\)/);
    const line = Number(/bad-list\.yaml:(\d+)\)/.exec(stdout.split('\n').find((l) => l.startsWith('Rejected'))!)![1]);
    // The third item starts below the other two: its own line, not the List's first.
    expect(text.split('\n')[line - 1]).toMatch(/^ {2}- /);
    expect(line).toBeGreaterThan(20);
    expect(stdout).toContain('3 resources: 2 accepted, 0 with warnings, 1 rejected');
  });

  it('a List mixed with plain documents, an empty List, a VirtualServiceList, and a List whose items is not a list', async () => {
    const file = join(dir, 'mixed.yaml');
    const typed = stringify({ apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualServiceList', metadata: {}, items: [vs('typed', 'echo')] });
    await writeFile(file, [stringify({ ...upstream, metadata: { name: 'echo', namespace: 'shop' } }), kubectlList([]), typed, stringify({ apiVersion: 'v1', kind: 'List', items: { a: 1 } })].join('---\n'));
    const { code, stdout } = await runCli('gatehouse', ['validate', file]);
    expect(stdout).toContain('Accepted Upstream shop/echo');
    expect(stdout).toContain('Accepted VirtualService default/typed');
    expect(stdout).toMatch(/mixed\.yaml:\d+: error: List: items must be a list of resources \[GH_CONFIG_PARSE\]/);
    expect(code).toBe(1);
  });
});
