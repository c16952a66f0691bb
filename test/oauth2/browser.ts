/**
 * A browser for the OIDC tests, without a browser: follows redirects, keeps cookies per host
 * (honouring Max-Age=0 deletions), and submits the provider's HTML forms. Requests to the app's
 * host go to the gateway's real port with that Host header.
 */
import { send, type Reply } from '../support/http.ts';

export interface Step {
  url: string;
  reply: Reply;
}

export class Browser {
  /** host → cookie name → value. */
  readonly jar = new Map<string, Map<string, string>>();
  /** Every set-cookie seen, as sent. */
  readonly setCookies: string[] = [];
  private readonly hosts: Map<string, string>;

  /** `hosts`: host[:port] → base URL to connect to (the gateway for the app's host). */
  constructor(hosts: Record<string, string>) {
    this.hosts = new Map(Object.entries(hosts));
  }

  cookies(host: string): Map<string, string> {
    let jar = this.jar.get(host);
    if (!jar) this.jar.set(host, (jar = new Map()));
    return jar;
  }

  /** One request, cookies sent and stored. */
  async request(url: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<Reply> {
    const target = new URL(url);
    const base = this.hosts.get(target.host) ?? target.origin;
    const jar = this.cookies(target.host);
    const headers: Record<string, string> = { host: target.host, ...init.headers };
    if (jar.size && !headers.cookie) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const body = init.form ? new URLSearchParams(init.form).toString() : undefined;
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const reply = await send(base, { method: init.method ?? (body !== undefined ? 'POST' : 'GET'), path: target.pathname + target.search, headers, ...(body !== undefined ? { body } : {}) });
    const set = reply.headers['set-cookie'] ?? [];
    for (const line of set) {
      this.setCookies.push(line);
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '') jar.delete(name);
      else jar.set(name, value);
    }
    return reply;
  }

  /** Follows redirects from `url` (at most 20) and answers every step. */
  async follow(url: string, init: Parameters<Browser['request']>[1] = {}): Promise<Step[]> {
    const steps: Step[] = [];
    let current = url;
    let reply = await this.request(current, init);
    steps.push({ url: current, reply });
    while (reply.status >= 300 && reply.status < 400 && reply.headers.location) {
      if (steps.length > 20) throw new Error(`too many redirects: ${steps.map((s) => s.url).join(' -> ')}`);
      current = new URL(reply.headers.location, current).href;
      reply = await this.request(current);
      steps.push({ url: current, reply });
    }
    return steps;
  }

  /** Submits the page's first form with `fields` (action resolved against the page URL) and follows. */
  async submit(page: Step, fields: Record<string, string>): Promise<Step[]> {
    const action = /<form[^>]*action="([^"]*)"/i.exec(page.reply.body)?.[1];
    if (action === undefined) throw new Error(`no form on ${page.url}: ${page.reply.body.slice(0, 300)}`);
    const hidden: Record<string, string> = {};
    for (const m of page.reply.body.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/gi)) hidden[m[1]!] = m[2]!;
    return this.follow(new URL(action.replace(/&amp;/g, '&'), page.url).href, { form: { ...hidden, ...fields } });
  }
}
