import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { OciCodes, OciError } from './errors.ts';
import type { RegistryCredentials } from './registry-client.ts';

/**
 * Credentials for a registry host, looked up in this order:
 * 1. `GATEHOUSE_REGISTRY_USERNAME` / `GATEHOUSE_REGISTRY_PASSWORD` (every registry the command talks to);
 * 2. the `auths` of a containers auth file or Docker config: `REGISTRY_AUTH_FILE`,
 *    `$DOCKER_CONFIG/config.json`, `~/.docker/config.json` (the first that exists).
 * Credential helpers (`credsStore`) are not run; put the entry in the file instead.
 */
export function credentialsFromEnvironment(env: NodeJS.ProcessEnv = process.env): (registry: string) => RegistryCredentials | undefined {
  const username = env.GATEHOUSE_REGISTRY_USERNAME;
  const password = env.GATEHOUSE_REGISTRY_PASSWORD;
  if ((username === undefined) !== (password === undefined)) {
    throw new OciError(OciCodes.BAD_INPUT, 'set both GATEHOUSE_REGISTRY_USERNAME and GATEHOUSE_REGISTRY_PASSWORD, or neither');
  }
  if (username !== undefined && password !== undefined) return () => ({ username, password });
  const auths = loadAuthFile(env);
  return (registry) => {
    const keys = registry === 'docker.io' ? ['docker.io', 'index.docker.io', 'https://index.docker.io/v1/', 'registry-1.docker.io'] : [registry, `https://${registry}`, `http://${registry}`];
    for (const key of keys) {
      const entry = auths[key];
      if (!entry) continue;
      if (typeof entry.auth === 'string' && entry.auth !== '') {
        const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        if (colon > 0) return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
      }
      if (typeof entry.username === 'string' && typeof entry.password === 'string') return { username: entry.username, password: entry.password };
    }
    return undefined;
  };
}

type AuthEntry = { auth?: unknown; username?: unknown; password?: unknown };

function loadAuthFile(env: NodeJS.ProcessEnv): Record<string, AuthEntry> {
  const candidates = [env.REGISTRY_AUTH_FILE, env.DOCKER_CONFIG ? join(env.DOCKER_CONFIG, 'config.json') : undefined, join(env.HOME ?? homedir(), '.docker', 'config.json')];
  for (const file of candidates) {
    if (!file) continue;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    try {
      const parsed = JSON.parse(text) as { auths?: Record<string, AuthEntry> };
      return parsed.auths ?? {};
    } catch (error) {
      throw new OciError(OciCodes.BAD_INPUT, `${file}: not valid JSON (${(error as Error).message}); fix or remove the registry auth file`);
    }
  }
  return {};
}
