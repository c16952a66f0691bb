import { connect } from 'node:http2';
import { fileURLToPath } from 'node:url';

/** The bench's gRPC service (bench.Echo/Unary). */
export const ECHO_PROTO_FILE = fileURLToPath(new URL('./fixtures/echo.proto', import.meta.url));
export const ECHO_PATH = '/bench.Echo/Unary';

/** One length-prefixed gRPC message: Msg{text: "hello", n: 1}, encoded by hand (two fields). */
export function echoRequestFrame(): Buffer {
  const text = Buffer.from('hello');
  const message = Buffer.concat([Buffer.from([0x0a, text.length]), text, Buffer.from([0x10, 0x01])]);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/**
 * One call over h2c, checking the answer is a real gRPC success (h2load counts HTTP statuses,
 * and a failed gRPC call is HTTP 200 too): throws unless grpc-status is 0 and the echo came back.
 */
export async function checkEchoCall(origin: string, authority: string): Promise<void> {
  const session = connect(origin);
  try {
    const stream = session.request({ ':method': 'POST', ':path': ECHO_PATH, ':authority': authority, 'content-type': 'application/grpc', te: 'trailers' });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    const status = await new Promise<string | undefined>((resolve, reject) => {
      let fromHeaders: string | undefined;
      stream.on('response', (h) => (fromHeaders = h['grpc-status'] as string | undefined));
      stream.on('trailers', (t) => resolve(t['grpc-status'] as string | undefined));
      stream.on('end', () => resolve(fromHeaders));
      stream.on('error', reject);
      stream.end(echoRequestFrame());
    });
    if (status !== '0' || !Buffer.concat(chunks).subarray(5).equals(echoRequestFrame().subarray(5))) throw new Error(`gRPC check call failed: grpc-status ${status}`);
  } finally {
    session.close();
  }
}
