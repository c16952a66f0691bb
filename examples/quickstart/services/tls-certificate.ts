import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DIR = fileURLToPath(new URL('../tls/', import.meta.url));

/**
 * A self-signed certificate for `localhost` (and 127.0.0.1) for the quickstart's HTTPS host
 * (config/https.yaml), made with the openssl CLI on the first `npm start` and kept in
 * examples/quickstart/tls/ (git-ignored). Not a service: nothing to close.
 */
export default async function start() {
  const cert = join(DIR, 'tls.crt');
  if (!existsSync(cert)) {
    mkdirSync(DIR, { recursive: true });
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(DIR, 'tls.key'), '-out', cert, '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-days', '365'], { stdio: 'ignore' });
    } catch {
      console.warn('quickstart: openssl is not installed, so the HTTPS host (config/https.yaml) has no certificate and is rejected; install openssl and run `npm start` again');
    }
  }
  return { name: 'tls', url: `file://${cert}`, close: async () => {} };
}
