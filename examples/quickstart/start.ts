// `npm start`: the quickstart. Starts the demo upstreams in this process, then
// `gatehouse run` on examples/quickstart/config, and prints what to curl.
import { spawn } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const CONFIG = join(HERE, 'config');

interface Service {
  name: string;
  url: string;
  close(): Promise<void>;
}

const services: Service[] = [];
for (const file of (await readdir(join(HERE, 'services'))).filter((f) => f.endsWith('.ts')).sort()) {
  const module = (await import(join(HERE, 'services', file))) as { default: () => Promise<Service> };
  let service: Service;
  try {
    service = await module.default();
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    console.error(`quickstart: the demo upstream in services/${file} could not start: ${message}`);
    if (code === 'EADDRINUSE') console.error('another process uses that port (an earlier `npm start`?): stop it and run `npm start` again');
    await Promise.all(services.map((s) => s.close()));
    process.exit(1);
  }
  services.push(service);
  console.log(`demo upstream ${service.name.padEnd(12)} ${service.url}`);
}

const tries: string[] = [];
for (const file of (await readdir(CONFIG)).filter((f) => /\.ya?ml$/.test(f)).sort()) {
  for (const line of (await readFile(join(CONFIG, file), 'utf8')).split('\n')) {
    const match = /^#\s*try:\s*(.+)$/.exec(line);
    if (match) tries.push(match[1]!);
  }
}

const pluginDir = join(HERE, 'plugins');
const gateway = spawn(process.execPath, [...NODE_FLAGS, CLI, 'run', '--config-dir', CONFIG, '--plugin-dir', pluginDir, '--host', '127.0.0.1', ...process.argv.slice(2)], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let shown = false;
let buffered = '';
gateway.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
  process.stdout.write(chunk);
  if (shown) return;
  buffered += chunk;
  if (buffered.includes('"msg":"listening"')) {
    shown = true;
    console.log(`\nGatehouse is up: traffic :8080 (HTTP/1.1 and h2c), HTTPS :8443 (HTTP/2 by ALPN), admin :9901 (/healthz /readyz /metrics /config), extauth :8083.`);
    console.log(`Edit ${CONFIG} and the gateway reloads. Try:\n\n  ${tries.join('\n  ')}\n\nCtrl-C stops everything.\n`);
  }
});

const stop = () => gateway.kill('SIGTERM');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
gateway.on('exit', async (code) => {
  await Promise.all(services.map((s) => s.close()));
  process.exit(code ?? 0);
});
