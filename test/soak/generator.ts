/**
 * The hostile-input generator of the soak: a seeded PRNG and the input families (raw HTTP/1.1
 * over TCP and TLS, hand-built HTTP/2 frames over h2c and TLS, WebSocket and h2c upgrades, gRPC).
 * Every input is data (bytes to write, when to stop, what counts as done), so a failing input is
 * printed and replayed exactly from the seed.
 */
import { F, T, frame, headers, ping, rstStream, settings, windowUpdate } from './h2-frames.ts';

/** mulberry32: small, fast and good enough to pick inputs; the same seed gives the same inputs. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One raw HTTP/1.1 input: bytes written in `chunks` (with `delayMs` between), on TCP or TLS. */
export interface H1Input {
  readonly kind: 'h1';
  readonly family: string;
  readonly tls: boolean;
  readonly chunks: readonly Buffer[];
  readonly delayMs: number;
  /** Close right after writing (an early close): no answer is awaited, only survival. */
  readonly closeEarly: boolean;
}

/** One raw HTTP/2 input: SETTINGS of the client's preface, then `frames`; the streams that must settle. */
export interface H2Input {
  readonly kind: 'h2';
  readonly family: string;
  readonly tls: boolean;
  readonly servername?: string;
  readonly frames: readonly Buffer[];
  /** Streams that must get an answer or a reset (or be refused by GOAWAY / close). */
  readonly await: readonly number[];
  /** Reset `await` with CANCEL this long after writing, and stop waiting (client cancellation). */
  readonly cancelAfterMs?: number;
}

export type Input = (H1Input | H2Input) & { readonly id: number; readonly description: string };

/** Credentials the protected routes accept (`alice:wonderland`) and some they refuse. */
export const GOOD_AUTH = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;
const BAD_AUTHS = ['', `Basic ${Buffer.from('alice:wrong').toString('base64')}`, 'Basic', 'Basic !!!', `Bearer x`, `basic ${Buffer.from('alice:wonderland').toString('base64').toLowerCase()}`, `Basic ${'A'.repeat(5000)}`];

/** Request targets, many of them other spellings of the protected `/admin`, `/secret` and `/api`. */
const TARGETS = [
  '/', '/public', '/admin', '/admin/x', '/admin#x', '/admin#', '/#/admin', '/secret', '/secret#a', '/secret?x=1', '/secret/', '/SECRET', '/%73ecret',
  '/%61dmin', '/%2561dmin', '//admin', '/./admin', '/public/../admin', '/public/%2e%2e/admin', '/public/%2E%2E/admin', '/admin%2fx', '/%2fadmin',
  '/\\admin', '/admin%5cx', '/admin;x', '/admin%00', '/admin%', '/admin%zz', '/api/users', '/api', '/graphql', '*', 'http://evil.test/admin',
  'http://127.0.0.1/admin', 'admin', '/admin?#', `/${'a'.repeat(9000)}`, `/${'%41'.repeat(3000)}`, '/public?' + 'q=1&'.repeat(2000), '/\u00e9', '/admin\t',
];
const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'post', 'Post', 'pOST', 'CONNECT', 'TRACE', 'PATCH', 'G\u00c9T', 'PRI', 'X'.repeat(300), ''];
const HOSTS = ['127.0.0.1', 'shop.test', '', 'a@b', 'x:abc', 'x:1:2', '[::1', 'h'.repeat(300), 'evil.test.', 'LOCALHOST'];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/2', 'HTTP/3.0', 'HTTP/1.2', 'HTTP/0.9', 'HTTP/9.9', 'http/1.1', 'HTTP/1.1 ', 'HTTP/01.1', ''];
const UPGRADES = ['websocket', 'h2c', 'h2c, websocket', 'websocket, h2c', 'WebSocket', 'websocket, foo', 'foo', 'h2c,websocket', ' websocket', 'websocket\t,h2c', 'HTTP/2.0', 'tls/1.2'];

const crlf = (lines: string[]) => lines.join('\r\n') + '\r\n\r\n';
const b = (s: string) => Buffer.from(s, 'latin1');

/** The generator: `count` inputs from `seed`, in a fixed order of families (round-robin, random within). */
export function generate(seed: number, count: number): Input[] {
  const rand = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const auth = () => (rand() < 0.2 ? GOOD_AUTH : pick(BAD_AUTHS));
  const authLine = (value: string) => (value ? [`Authorization: ${value}`] : []);

  const h1 = (family: string, description: string, chunks: Buffer[], options: { delayMs?: number; closeEarly?: boolean } = {}): Omit<H1Input, 'tls'> & { description: string } => ({
    kind: 'h1',
    family,
    description,
    chunks,
    delayMs: options.delayMs ?? 0,
    closeEarly: options.closeEarly ?? false,
  });

  /** HTTP/1.1 families; each returns one input. */
  const h1Families: (() => ReturnType<typeof h1>)[] = [
    // Request lines: odd methods, targets and versions (HTTP/2.0 was a remote kill switch).
    () => {
      const line = `${pick(METHODS)} ${pick(TARGETS)} ${pick(VERSIONS)}`;
      return h1('request-line', line.slice(0, 120), [b(crlf([line, `Host: ${pick(HOSTS)}`, ...authLine(auth()), 'Connection: close']))]);
    },
    () => {
      const junk = Buffer.from(Array.from({ length: int(1, 200) }, () => int(0, 255)));
      return h1('junk', `${junk.length} random bytes`, [junk, b('\r\n\r\n')]);
    },
    // Header floods: many headers, a huge one, odd names, obs-fold.
    () => {
      const n = pick([101, 150, 500, 2000]);
      return h1('header-flood', `${n} headers`, [b(crlf(['GET /public HTTP/1.1', 'Host: 127.0.0.1', ...Array.from({ length: n }, (_, i) => `X-H${i}: ${i}`), 'Connection: close']))]);
    },
    () => {
      const size = pick([8_000, 16_000, 70_000, 200_000]);
      return h1('header-flood', `one ${size}-byte header`, [b(crlf(['GET /admin HTTP/1.1', 'Host: 127.0.0.1', `X-Big: ${'v'.repeat(size)}`, 'Connection: close']))]);
    },
    () => {
      const header = pick(['X Y: 1', 'X:\u0000', ': empty', 'X-Fold: a\r\n b', 'Host: a\r\nHost: b', 'Authorization: ' + GOOD_AUTH + '\r\nAuthorization: Basic x', 'X-User-Id: admin', 'x_user_id: alice', 'Connection: x-user-id, authorization', 'Content-Length: 0\r\nContent-Length: 0', 'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity']);
      return h1('bad-header', header.slice(0, 80), [b(crlf([`GET ${pick(['/admin', '/secret', '/public'])} HTTP/1.1`, 'Host: 127.0.0.1', header, 'Connection: close']))]);
    },
    // Chunked bodies gone wrong.
    () => {
      const body = pick(['zz\r\nhello\r\n0\r\n\r\n', '5\r\nhello0\r\n\r\n', 'ffffffffffffffffff\r\nx\r\n0\r\n\r\n', '5;' + 'e=1;'.repeat(2000) + '\r\nhello\r\n0\r\n\r\n', '-1\r\nx\r\n0\r\n\r\n', '5\r\nhel', '0\r\nTrailer: x\r\n\r\n', '0x5\r\nhello\r\n0\r\n\r\n', ' 5\r\nhello\r\n0\r\n\r\n', '5\nhello\n0\n\n']);
      return h1('bad-chunking', JSON.stringify(body.slice(0, 40)), [b(crlf([`POST ${pick(['/public', '/api/users', '/graphql'])} HTTP/1.1`, 'Host: 127.0.0.1', 'Transfer-Encoding: chunked', 'Connection: close']) + body)], { closeEarly: body === '5\r\nhel' });
    },
    // Request smuggling: CL/TE disagreements that would hide a second request to /admin.
    () => {
      const hidden = `GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
      const chunked = `0\r\n\r\n${hidden}`;
      const variant = pick([
        ['Content-Length: ' + chunked.length, 'Transfer-Encoding: chunked'],
        ['Transfer-Encoding: chunked', 'Content-Length: 4'],
        ['Transfer-Encoding: xchunked', 'Content-Length: ' + chunked.length],
        ['Transfer-Encoding : chunked'],
        ['Transfer-Encoding: chunked, identity'],
        ['Transfer-Encoding:\tchunked'],
        ['Transfer-Encoding:\r\n chunked'],
        ['Content-Length: 0', 'Content-Length: ' + chunked.length],
        ['Content-Length: +' + chunked.length],
        ['Content-Length: ' + chunked.length + ', 0'],
      ]);
      return h1('smuggling', variant.join(' | '), [b(crlf([`POST /public HTTP/1.1`, 'Host: 127.0.0.1', ...variant]) + chunked)]);
    },
    // Pipelining, including a request after Connection: close and a protected one after a public one.
    () => {
      const n = int(2, 6);
      const requests = Array.from({ length: n }, (_, i) => crlf([`${pick(['GET', 'HEAD', 'POST'])} ${pick(['/public', '/admin', '/secret', '/api/users', '/graphql'])} HTTP/1.1`, 'Host: 127.0.0.1', ...authLine(auth()), ...(i === n - 1 || rand() < 0.2 ? ['Connection: close'] : []), 'Content-Length: 0']));
      return h1('pipelining', `${n} requests in one write`, [b(requests.join(''))]);
    },
    // Slow bytes: a whole request, a few bytes at a time.
    () => {
      const text = crlf([`GET ${pick(['/public', '/admin', '/secret'])} HTTP/1.1`, 'Host: 127.0.0.1', ...authLine(auth()), 'Connection: close']);
      // At most ~150 writes: slow, but the input itself must end well within the soak's bound.
      const size = Math.max(int(3, 20), Math.ceil(text.length / 150));
      const chunks: Buffer[] = [];
      for (let i = 0; i < text.length; i += size) chunks.push(b(text.slice(i, i + size)));
      return h1('slow-bytes', `${chunks.length} chunks of ${size} bytes`, chunks, { delayMs: int(1, 10) });
    },
    // Early closes: half a request line, half the headers, half a body.
    () => {
      const full = crlf(['POST /api/users HTTP/1.1', 'Host: 127.0.0.1', 'Content-Length: 100']) + 'x'.repeat(50);
      const cut = int(1, full.length - 1);
      return h1('early-close', `closed after ${cut} of ${full.length} bytes`, [b(full.slice(0, cut))], { closeEarly: true });
    },
    // Expect: 100-continue with and without the body.
    () => {
      const sendBody = rand() < 0.5;
      return h1('expect-continue', `Expect: 100-continue, body ${sendBody ? 'sent' : 'withheld'}`, [b(crlf(['PUT /api/users HTTP/1.1', 'Host: 127.0.0.1', 'Expect: 100-continue', 'Content-Length: 5', ...authLine(auth()), 'Connection: close']) + (sendBody ? 'hello' : ''))], { closeEarly: !sendBody });
    },
    // Upgrades: WebSocket with odd lists, bodies, bad keys; h2c upgrades.
    () => {
      const upgrade = pick(UPGRADES);
      const key = pick(['dGhlIHNhbXBsZSBub25jZQ==', '', 'short', '!!!!', 'dGhlIHNhbXBsZSBub25jZQ==, dGhlIHNhbXBsZSBub25jZQ==']);
      const version = pick(['13', '8', '', '13, 8']);
      const body = rand() < 0.3 ? 'hello' : '';
      const lines = [
        `GET ${pick(['/public', '/admin', '/secret', '/graphql', '/soak.Secret/Get'])} HTTP/1.1`,
        'Host: 127.0.0.1',
        `Connection: ${pick(['Upgrade', 'upgrade, keep-alive', 'Upgrade, HTTP2-Settings', 'close, upgrade', 'keep-alive'])}`,
        `Upgrade: ${upgrade}`,
        ...(key ? [`Sec-WebSocket-Key: ${key}`] : []),
        ...(version ? [`Sec-WebSocket-Version: ${version}`] : []),
        ...(upgrade.includes('h2c') ? ['HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA'] : []),
        ...authLine(auth()),
        ...(body ? [`Content-Length: ${body.length}`] : []),
      ];
      return h1('upgrade', `Upgrade: ${upgrade}, key ${JSON.stringify(key)}, version ${JSON.stringify(version)}${body ? ', with a body' : ''}`, [b(crlf(lines) + body)]);
    },
    // GraphQL: malformed and heavy documents.
    () => {
      const query = pick(['{', '{ __typename }', '{ user(id: "1") { id } }', '{ ' + 'a: __typename '.repeat(2000) + '}', 'query { ' + '{'.repeat(500) + '}'.repeat(500) + ' }', 'mutation { x }', '']);
      const body = rand() < 0.2 ? 'not json' : JSON.stringify({ query });
      return h1('graphql', `${body.slice(0, 40)}…`, [b(crlf(['POST /graphql HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close']) + body)]);
    },
  ];

  const authField = (): [string, string][] => {
    const value = auth();
    return value ? [['authorization', value]] : [];
  };

  /** HTTP/2 families (the client preface and SETTINGS are added by the runner). */
  const h2Families: (() => Omit<H2Input, 'tls'> & { description: string })[] = [
    // One request with odd pseudo-headers, methods, authorities.
    () => {
      const method = pick(['GET', 'POST', 'post', 'Post', 'get', 'CONNECT', '', 'G ET', 'PRI']);
      const path = pick(['/public', '/admin', '/admin#x', '/secret', '/secret#x', '/%61dmin', '//admin', '/public/../admin', '/api/users', '', '*', 'admin', '/soak.Secret/Get']);
      const fields: [string, string][] = [];
      const order = rand() < 0.15 ? 'regular-first' : 'normal';
      const pseudo: [string, string][] = [[':method', method], [':scheme', pick(['http', 'https', '', 'ftp'])], [':path', path], [':authority', pick(['127.0.0.1', 'shop.test', '', 'evil.test'])]];
      const regular: [string, string][] = [...authField()];
      if (rand() < 0.3) regular.push(['host', pick(['127.0.0.1', 'shop.test', 'other.test'])]);
      if (rand() < 0.15) pseudo.push([pick([':foo', ':path', ':method', ':status', ':protocol']), pick(['/admin', 'GET', '200', 'websocket'])]);
      if (rand() < 0.15) regular.push([pick(['connection', 'te', 'transfer-encoding', 'upgrade', 'keep-alive', 'X-Upper', 'x-user-id', 'x_user_id']), pick(['keep-alive', 'gzip', 'trailers', 'chunked', 'h2c', 'alice'])]);
      if (rand() < 0.1) pseudo.splice(int(0, pseudo.length - 1), 1);
      fields.push(...(order === 'normal' ? [...pseudo, ...regular] : [...regular, ...pseudo]));
      const endStream = !['POST', 'post', 'Post'].includes(method) || rand() < 0.3;
      const frames = [headers(1, fields, { endStream, pieces: rand() < 0.3 ? int(2, 20) : 1 })];
      if (!endStream) frames.push(frame(T.DATA, F.END_STREAM, 1, Buffer.from('{"query":"{ __typename }"}')));
      return { kind: 'h2', family: 'h2-request', description: fields.map(([n, v]) => `${n}=${v.slice(0, 20)}`).join(' '), frames, await: [1] };
    },
    // RST floods under the rapid-reset limit, then an ordinary request on the same connection.
    () => {
      const n = int(5, 60);
      const frames: Buffer[] = [];
      for (let i = 0; i < n; i++) frames.push(headers(1 + 2 * i, [[':method', 'GET'], [':scheme', 'http'], [':path', pick(['/public', '/admin', '/slow'])], [':authority', '127.0.0.1']], { endStream: true }), rstStream(1 + 2 * i));
      const last = 1 + 2 * n;
      frames.push(headers(last, [[':method', 'GET'], [':scheme', 'http'], [':path', '/public'], [':authority', '127.0.0.1']], { endStream: true }));
      return { kind: 'h2', family: 'h2-rst-flood', description: `${n} HEADERS+RST_STREAM, then a GET`, frames, await: [last] };
    },
    // Zero windows: a client that never lets the response body flow.
    () => {
      const streams = int(1, 10);
      const frames = [settings([[4, 0]])];
      for (let i = 0; i < streams; i++) frames.push(headers(1 + 2 * i, [[':method', 'GET'], [':scheme', 'http'], [':path', pick(['/public', '/big'])], [':authority', '127.0.0.1']], { endStream: true }));
      return { kind: 'h2', family: 'h2-zero-window', description: `${streams} streams with SETTINGS_INITIAL_WINDOW_SIZE 0`, frames, await: Array.from({ length: streams }, (_, i) => 1 + 2 * i) };
    },
    // Control-frame oddities, then a request: unsolicited PING ACK, window overflows, odd SETTINGS, PRIORITY on itself.
    () => {
      const odd = pick([
        ['unsolicited PING ACK', ping(true)],
        ['PING', ping(false)],
        ['WINDOW_UPDATE 0', windowUpdate(0, 0)],
        ['connection window overflow', Buffer.concat([windowUpdate(0, 0x7fffffff), windowUpdate(0, 0x7fffffff)])],
        ['SETTINGS max frame size too small', settings([[5, 100]])],
        ['SETTINGS unknown id', settings([[0x99, 1]])],
        ['SETTINGS enable push 2', settings([[2, 2]])],
        ['PRIORITY on itself', frame(T.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 1, 16]))],
        ['PUSH_PROMISE from a client', frame(T.PUSH_PROMISE, F.END_HEADERS, 1, Buffer.from([0, 0, 0, 2]))],
        ['unknown frame type', frame(0x42, 0xff, 0, Buffer.from('x'))],
        ['DATA on idle stream', frame(T.DATA, 0, 5, Buffer.from('x'))],
        ['GOAWAY from the client', frame(T.GOAWAY, 0, 0, Buffer.alloc(8))],
      ] as const);
      const frames = [odd[1] as Buffer, headers(1, [[':method', 'GET'], [':scheme', 'http'], [':path', '/public'], [':authority', '127.0.0.1']], { endStream: true })];
      return { kind: 'h2', family: 'h2-control', description: odd[0], frames, await: [1] };
    },
    // CONTINUATION: a long chain of tiny fragments, and one never ended.
    () => {
      const pieces = int(2, 300);
      const ended = rand() < 0.8;
      const fields: [string, string][] = [[':method', 'GET'], [':scheme', 'http'], [':path', '/public'], [':authority', '127.0.0.1'], ...Array.from({ length: int(1, 50) }, (_, i): [string, string] => [`x-c${i}`, 'v'.repeat(int(1, 200))])];
      let block = headers(1, fields, { endStream: true, pieces });
      // Not ended: drop END_HEADERS from the last frame (the connection must not wait forever).
      if (!ended) block = Buffer.concat([block, frame(T.CONTINUATION, 0, 1, Buffer.from([0x00]))]);
      return { kind: 'h2', family: 'h2-continuation', description: `${pieces} fragments${ended ? '' : ', never ended'}`, frames: [block], await: ended ? [1] : [] };
    },
    // gRPC: cancelled before the response headers, odd grpc-timeout values, protected service without credentials.
    () => {
      const timeout = pick(['', '1S', '99999999H', '0n', '1n', '-1S', 'abc', '100000000S', '1m', '99999999u', '5M', ' 1S']);
      const service = pick(['/soak.Echo/Slow', '/soak.Echo/Unary', '/soak.Echo/Error', '/soak.Secret/Get', '/soak.Secret/Get#x', '/soak.Echo/Slow?x']);
      const cancel = rand() < 0.4;
      const fields: [string, string][] = [[':method', 'POST'], [':scheme', 'http'], [':path', service], [':authority', '127.0.0.1'], ['content-type', pick(['application/grpc', 'application/grpc+proto', 'application/json'])], ['te', 'trailers'], ...(timeout ? ([['grpc-timeout', timeout]] as [string, string][]) : []), ...authField()];
      const frames = [headers(1, fields), frame(T.DATA, F.END_STREAM, 1, Buffer.from([0, 0, 0, 0, 0]))];
      return { kind: 'h2', family: 'grpc', description: `${service} grpc-timeout=${JSON.stringify(timeout)}${cancel ? ', cancelled before headers' : ''}`, frames, await: [1], ...(cancel ? { cancelAfterMs: int(0, 50) } : {}) };
    },
  ];

  const inputs: Input[] = [];
  for (let id = 0; inputs.length < count; id++) {
    // About 55% HTTP/1.1 (a fifth of it over TLS), 45% HTTP/2 (a third over TLS).
    if (rand() < 0.55) {
      const made = pick(h1Families)();
      inputs.push({ ...made, id, tls: rand() < 0.2 } as Input);
    } else {
      const made = pick(h2Families)();
      inputs.push({ ...made, id, tls: rand() < 0.33 } as Input);
    }
  }
  return inputs;
}

/**
 * The known offenders, in every run whatever the seed: one input per finding of issues 17 and 29
 * that a client can send (the process-killers, stalls and bypasses), over each listener they apply
 * to. The seeded inputs then look for their relatives.
 */
export function knownInputs(): Input[] {
  const get = (target: string, extra: string[] = [], version = 'HTTP/1.1') => b(crlf([`GET ${target} ${version}`, 'Host: 127.0.0.1', ...extra, 'Connection: close']));
  type Unnumbered = (H1Input | H2Input) & { readonly description: string };
  const h1 = (family: string, description: string, bytes: Buffer, tls: boolean, closeEarly = false): Unnumbered => ({ kind: 'h1', family: `known: ${family}`, description, chunks: [bytes], delayMs: 0, closeEarly, tls });
  const h2 = (family: string, description: string, frames: Buffer[], tls: boolean, extra: { await?: number[]; cancelAfterMs?: number } = {}): Unnumbered => ({ kind: 'h2', family: `known: ${family}`, description, frames, await: extra.await ?? [1], ...(extra.cancelAfterMs !== undefined ? { cancelAfterMs: extra.cancelAfterMs } : {}), tls });
  const req = (path: string, more: [string, string][] = [], method = 'GET', authority = '127.0.0.1'): [string, string][] => [[':method', method], [':scheme', 'http'], [':path', path], [':authority', authority], ...more];
  const grpcCall = (path: string, more: [string, string][] = []) => [headers(1, req(path, [['content-type', 'application/grpc'], ['te', 'trailers'], ...more], 'POST')), frame(T.DATA, F.END_STREAM, 1, Buffer.from([0, 0, 0, 0, 0]))];
  const made: Unnumbered[] = [];
  for (const tls of [false, true]) {
    made.push(
      h1('29.1 HTTP/2.0 request line', 'GET / HTTP/2.0', get('/public', [], 'HTTP/2.0'), tls),
      h1('29.9 fragment', 'GET /secret#x', get('/secret#x'), tls),
      h1('29.9 fragment', 'GET /admin#x', get('/admin#x'), tls),
      h1('29.12 h2c in an Upgrade list', 'Upgrade: h2c, websocket to /public', get('/public', ['Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c, websocket', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']), tls),
      h1('29.14 Expect: 100-continue', 'PUT with Expect: 100-continue', b(crlf(['PUT /api/users HTTP/1.1', 'Host: 127.0.0.1', 'Expect: 100-continue', 'Content-Length: 5', `Authorization: ${GOOD_AUTH}`, 'Connection: close']) + 'hello'), tls),
      h1('29.18 pipelined after Connection: close', 'two requests, the first with Connection: close', b(crlf(['GET /public HTTP/1.1', 'Host: 127.0.0.1', 'Connection: close']) + crlf(['GET /admin HTTP/1.1', 'Host: 127.0.0.1'])), tls),
      h1('29.18 header count', '500 request headers', get('/public', Array.from({ length: 500 }, (_, i) => `X-H${i}: ${i}`)), tls),
      h1('new: Upgrade to an HTTP/2 upstream', 'WebSocket upgrade on the gRPC route (useHttp2 upstream)', get('/soak.Echo/Unary', ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']), tls),
      h2('29.2 gRPC cancelled before response headers', '/soak.Echo/Slow, RST_STREAM(CANCEL) after 20 ms', grpcCall('/soak.Echo/Slow'), tls, { cancelAfterMs: 20 }),
      h2('29.7 unsolicited PING ACK', 'PING ACK, then a GET', [ping(true), headers(1, req('/public'), { endStream: true })], tls),
      h2('29.7 grpc-timeout overflow', 'grpc-timeout: 99999999H', grpcCall('/soak.Echo/Unary', [['grpc-timeout', '99999999H']]), tls),
      h2('29.9 fragment over HTTP/2', ':path /secret#x', [headers(1, req('/secret#x'), { endStream: true })], tls),
      h2('29.10 :authority and host differ', ':authority 127.0.0.1, host evil.test', [headers(1, req('/admin', [['host', 'evil.test']]), { endStream: true })], tls),
      h2('29.11 lower-case method', ':method post on /api/users', [headers(1, req('/api/users', [], 'post')), frame(T.DATA, F.END_STREAM, 1, Buffer.from('x'))], tls),
      h2('29.13 trailers-only', '/soak.Echo/Error (grpc-status in the only HEADERS)', grpcCall('/soak.Echo/Error'), tls),
      h2('29.3 rapid reset under the limit', '30 HEADERS+RST_STREAM to /slow, then a GET', [...Array.from({ length: 30 }, (_, i) => Buffer.concat([headers(1 + 2 * i, req('/slow'), { endStream: true }), rstStream(1 + 2 * i)])), headers(61, req('/public'), { endStream: true })], tls, { await: [61] }),
    );
  }
  // The TLS listener only: Upgrade: h2c must be ignored there (Envoy), not answered 502.
  made.push(h1('29.18 Upgrade: h2c on TLS', 'Upgrade: h2c over TLS', get('/public', ['Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA']), true));
  return made.map((input, i) => ({ ...input, id: -1 - i }) as Input);
}
