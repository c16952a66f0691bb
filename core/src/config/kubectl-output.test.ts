import { describe, expect, it } from 'vitest';
import { parseManifests } from './manifest.ts';
import { ConfigStore } from './store.ts';

/** Manifests as `kubectl get -o yaml` prints them (issue 15 item 5): server-filled fields, status, Gloo's discoveryMetadata and displayName. */
const KUBECTL_OUTPUT = `
apiVersion: gloo.solo.io/v1
kind: Upstream
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"gloo.solo.io/v1"}'
  creationTimestamp: "2026-11-20T10:00:00Z"
  generation: 3
  labels: { discovered_by: kubernetesplugin }
  managedFields:
  - apiVersion: gloo.solo.io/v1
    fieldsType: FieldsV1
    manager: discovery
    operation: Update
  name: default-petstore-8080
  namespace: gloo-system
  resourceVersion: "123456"
  selfLink: /apis/gloo.solo.io/v1/namespaces/gloo-system/upstreams/default-petstore-8080
  uid: 2a4c9f1e-0000-4000-8000-000000000001
spec:
  discoveryMetadata:
    labels: { app: petstore }
  static:
    hosts: [{ addr: 127.0.0.1, port: 8080 }]
status:
  statuses:
    gloo-system:
      reportedBy: gloo
      state: 1
---
apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata:
  name: petstore
  namespace: gloo-system
  generation: 1
  resourceVersion: "123457"
  uid: 2a4c9f1e-0000-4000-8000-000000000002
  creationTimestamp: "2026-11-20T10:00:01Z"
spec:
  displayName: Pet store
  virtualHost:
    domains: ['*']
    routes:
    - matchers: [{ prefix: / }]
      routeAction: { single: { upstream: { name: default-petstore-8080, namespace: gloo-system } } }
status:
  statuses:
    gloo-system: { reportedBy: gateway, state: Accepted }
`;

describe('manifests as kubectl prints them', () => {
  it('load unchanged: server-filled metadata, status, discoveryMetadata and displayName are accepted and ignored', () => {
    const { documents, diagnostics } = parseManifests('kubectl.yaml', KUBECTL_OUTPUT);
    const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(documents, diagnostics);
    expect(snapshot.diagnostics).toEqual([]);
    expect(snapshot.statuses.map((s) => `${s.kind} ${s.state}`)).toEqual(['Upstream Accepted', 'VirtualService Accepted']);
  });
});
