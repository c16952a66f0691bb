/**
 * Active health checks of upstream hosts (Gloo's `healthChecks`): the HTTP and gRPC probes
 * (the TCP one is ./tcp-health-check.ts) and the settings a cluster runs them with.
 */
import type { TcpHealthCheck } from './tcp-health-check.ts';
import type { UpstreamHost } from './upstream-cluster.ts';

/** An HTTP health check: GET `path`, passing on an expected status. */
export async function httpHealthProbe(host: UpstreamHost, check: HealthCheck, signal: AbortSignal): Promise<boolean> {
  const { statusCode, body } = await host.dispatcher.request({ path: check.path!, method: 'GET', headers: { host: check.host ?? host.addr, 'user-agent': 'gatehouse-health-check' }, signal });
  await body.dump();
  return check.expected(statusCode);
}

/**
 * gRPC's health check (Envoy's grpc_health_check): a unary `grpc.health.v1.Health/Check` for
 * `serviceName` over the host's HTTP/2 connections; it passes on grpc-status 0 with SERVING.
 * The message is a single string field, encoded by hand (no proto loading for one field).
 */
export async function grpcHealthProbe(host: UpstreamHost, grpc: { serviceName: string; authority?: string | undefined }, signal: AbortSignal): Promise<boolean> {
  const service = Buffer.from(grpc.serviceName, 'utf8');
  // HealthCheckRequest { string service = 1; }: tag 0x0a, varint length, bytes (omitted when empty, as proto3 does).
  const message = service.length > 0 ? Buffer.concat([Buffer.from([0x0a]), varint(service.length), service]) : Buffer.alloc(0);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  const response = await host.dispatcher.request({
    path: '/grpc.health.v1.Health/Check',
    method: 'POST',
    headers: { host: grpc.authority ?? host.addr, 'content-type': 'application/grpc', te: 'trailers', 'user-agent': 'gatehouse-health-check' },
    body: frame,
    signal,
  });
  const body = Buffer.from(await response.body.arrayBuffer());
  // Trailers-only answers carry grpc-status in the headers.
  const grpcStatus = response.trailers['grpc-status'] ?? response.headers['grpc-status'];
  if (response.statusCode !== 200 || String(grpcStatus) !== '0' || body.length < 5 || body[0] !== 0) return false;
  return servingStatusOf(body.subarray(5, 5 + body.readUInt32BE(1))) === 1;
}

/** HealthCheckResponse.status (field 1, varint; absent = 0, UNKNOWN). */
function servingStatusOf(message: Buffer): number {
  let i = 0;
  let status = 0;
  while (i < message.length) {
    const key = message[i++]!;
    const wire = key & 7;
    let value = 0;
    let shift = 0;
    if (wire === 0) {
      let byte: number;
      do {
        byte = message[i++]!;
        value += (byte & 0x7f) * 2 ** shift;
        shift += 7;
      } while (byte & 0x80 && i < message.length);
      if (key >> 3 === 1) status = value;
    } else if (wire === 2) {
      let length = 0;
      let byte: number;
      do {
        byte = message[i++]!;
        length += (byte & 0x7f) * 2 ** shift;
        shift += 7;
      } while (byte & 0x80 && i < message.length);
      i += length;
    } else return 0;
  }
  return status;
}

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  bytes.push(n);
  return Buffer.from(bytes);
}

/** An active health check: HTTP (`path`), gRPC (`grpc`) or TCP (`tcp`). */
export interface HealthCheck {
  path?: string;
  grpc?: { serviceName: string; authority?: string | undefined };
  tcp?: TcpHealthCheck;
  host?: string;
  intervalMs: number;
  timeoutMs: number;
  healthyThreshold: number;
  unhealthyThreshold: number;
  expected: (status: number) => boolean;
}

