import { createServer } from 'node:http';

/** A small JSON API (users and their posts) on 127.0.0.1:9101 for the quickstart. */
const USERS = [
  { id: '1', name: 'Ada Lovelace', email: 'ada@example.com' },
  { id: '2', name: 'Alan Turing', email: 'alan@example.com' },
];
const POSTS = [
  { id: '10', userId: '1', title: 'Notes on the Analytical Engine' },
  { id: '11', userId: '1', title: 'On Bernoulli numbers' },
  { id: '20', userId: '2', title: 'Computing Machinery and Intelligence' },
];

export default async function start() {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'api') return send(404, { error: 'not found' });
    if (parts[1] === 'users' && parts.length === 2) return send(200, USERS);
    if (parts[1] === 'users' && parts.length === 3) {
      const user = USERS.find((u) => u.id === parts[2]);
      return user ? send(200, user) : send(404, { error: `no user ${parts[2]}` });
    }
    if (parts[1] === 'users' && parts[3] === 'posts') return send(200, POSTS.filter((p) => p.userId === parts[2]));
    if (parts[1] === 'posts' && parts.length === 2) return send(200, POSTS);
    return send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(9101, '127.0.0.1', resolve));
  return { name: 'rest-demo', url: 'http://127.0.0.1:9101', close: () => new Promise<void>((r) => server.close(() => r())) };
}
