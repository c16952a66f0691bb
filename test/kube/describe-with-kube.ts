import { describe, it } from 'vitest';
import { requireKube, type KubeBinaries } from './apiserver.ts';

/**
 * A suite that needs etcd and kube-apiserver (the CI/SKIPPED rule of {@link requireKube}):
 * `body` gets the binaries; without them the suite fails under `CI=true` and is skipped, with a
 * loud SKIPPED line, elsewhere. Kept apart from apiserver.ts, which plain scripts import too.
 */
export function describeWithKube(title: string, testFile: string, body: (binaries: KubeBinaries) => void): void {
  const kube = requireKube(testFile);
  if (kube instanceof Error) {
    describe(title, () => {
      it('needs etcd and kube-apiserver on CI', () => {
        throw kube;
      });
    });
    return;
  }
  // Skipped: the body only registers tests and hooks, none of which runs.
  describe.skipIf(!kube)(title, () => body(kube as KubeBinaries));
}
