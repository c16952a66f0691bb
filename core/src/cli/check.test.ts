import { describe, expect, it } from 'vitest';
import { initFailure, podPhase, type PodJson } from './check.ts';

const pod = (status: PodJson['status']): PodJson => ({ metadata: { name: 'extauth-1' }, spec: { containers: [{ name: 'extauth', image: 'x' }] }, status });
const message = 'gatehouse-init: OldHeader.js was built for gateway version 0.0.9, not 0.1.0 [GH_INIT_TAG_MISMATCH]\n';

describe('gatehouse check reads a failed init container', () => {
  it('from its terminated state (Init:Error)', () => {
    const failed = pod({ initContainerStatuses: [{ name: 'plugin-old-header', state: { terminated: { exitCode: 1, reason: 'Error', message } } }] });
    expect(podPhase(failed)).toBe('Init:Error');
    expect(initFailure(failed)).toBe(`plugin-old-header: ${message.trim()}`);
  });

  // The kubelet restarts a failed init container with a back-off: between runs its state is
  // `waiting` and the words are in `lastState` (a cluster test saw the reason vanish there).
  it('from the run that failed while the kubelet waits to restart it (Init:CrashLoopBackOff)', () => {
    const backingOff = pod({
      initContainerStatuses: [{ name: 'plugin-old-header', restartCount: 2, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 1, reason: 'Error', message } } }],
    });
    expect(podPhase(backingOff)).toBe('Init:CrashLoopBackOff');
    expect(initFailure(backingOff)).toBe(`plugin-old-header: ${message.trim()}`);
  });

  // Regression: a cluster test's `gatehouse check` caught the retry running, and named no failure.
  it('from the run that failed while the kubelet runs it again', () => {
    const retrying = pod({
      initContainerStatuses: [{ name: 'plugin-old-header', restartCount: 3, state: { running: {} }, lastState: { terminated: { exitCode: 1, reason: 'Error', message } } }],
    });
    expect(podPhase(retrying)).toBe('Init:Error');
    expect(initFailure(retrying)).toBe(`plugin-old-header: ${message.trim()}`);
  });

  it('nothing for an init container that succeeded or is still running', () => {
    expect(initFailure(pod({ initContainerStatuses: [{ name: 'plugin', state: { terminated: { exitCode: 0, message: 'done' } } }] }))).toBeUndefined();
    expect(initFailure(pod({ initContainerStatuses: [{ name: 'plugin', state: { waiting: { reason: 'PodInitializing' } }, lastState: {} }] }))).toBeUndefined();
    expect(initFailure(pod({ initContainerStatuses: [{ name: 'plugin', state: { running: {} }, lastState: {} }] }))).toBeUndefined();
  });
});
