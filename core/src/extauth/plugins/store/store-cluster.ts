import cluster from 'node:cluster';
import { configureMemoryStore, memoryRoute, RemoteMemoryRoute, serveStoreRequests, type StoreReply, type StoreRequest } from './store-hub.ts';

/**
 * `gatehouse run --workers N` (N > 1): the memory store's hub lives in the cluster primary
 * (./store-hub.ts), which every worker reaches over the cluster's IPC channel. The primary serves
 * no traffic and outlives every worker, so counters survive a worker's restart too.
 */

interface StoreMessage {
  type: 'gatehouse:store';
  requests: StoreRequest[];
}
interface StoredMessage {
  type: 'gatehouse:stored';
  replies: StoreReply[];
}

/** In the primary: keep the hub here and answer the workers' store operations. */
export function serveMemoryStoreToWorkers(): void {
  configureMemoryStore('here');
  cluster.on('message', (worker, message: Partial<StoreMessage> | null) => {
    if (message?.type !== 'gatehouse:store') return;
    serveStoreRequests(message.requests, memoryRoute(), (replies) => {
      if (worker.isConnected()) worker.send({ type: 'gatehouse:stored', replies } satisfies StoredMessage, (error: Error | null) => void error);
    });
  });
}

/** In a worker: reach the primary's hub. */
export function useMemoryStoreOfPrimary(): void {
  const route = new RemoteMemoryRoute((requests) => {
    if (process.connected) process.send!({ type: 'gatehouse:store', requests } satisfies StoreMessage, undefined, {}, (error: Error | null) => void error);
  });
  process.on('message', (message: Partial<StoredMessage> | null) => {
    if (message?.type === 'gatehouse:stored' && Array.isArray(message.replies)) route.answered(message.replies);
  });
  process.on('disconnect', () => route.failAll('the gateway primary is gone'));
  configureMemoryStore(route);
}
