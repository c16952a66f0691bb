/**
 * A real OpenLDAP `slapd` (Debian's, test/ldap/install-slapd.sh) for the ldap tests: its own
 * configuration file and database in a temporary directory, listening on 127.0.0.1, loaded with
 * the users and groups of Gloo's LDAP guide (setup-ldap.sh) through `ldapadd`, so that the
 * `memberof` overlay fills in `memberOf` as it does in the guide's server.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { freePort } from '../support/ports.ts';

const SLAPD = process.env.GATEHOUSE_SLAPD ?? '/usr/sbin/slapd';

/** The slapd binary and ldapadd when installed; the CI/SKIPPED rule of test/kube/describe-with-kube.ts otherwise. */
function requireSlapd(testFile: string): true | Error | undefined {
  if (existsSync(SLAPD) && existsSync('/usr/bin/ldapadd')) return true;
  const message = 'slapd or ldapadd not found: run test/ldap/install-slapd.sh';
  if (process.env.CI === 'true') return new Error(message);
  console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  return undefined;
}

/** A suite that needs slapd: fails under CI=true without it, and is skipped loudly elsewhere. */
export function describeWithSlapd(title: string, testFile: string, body: () => void): void {
  const found = requireSlapd(testFile);
  if (found instanceof Error) {
    describe(title, () => {
      it('needs slapd on CI', () => {
        throw found;
      });
    });
    return;
  }
  describe.skipIf(!found)(title, body);
}

/** The guide's directory: admin cn=admin,dc=solo,dc=io / solopwd. */
export const ADMIN_DN = 'cn=admin,dc=solo,dc=io';
export const ADMIN_PASSWORD = 'solopwd';

/** Gloo's LDAP guide's people and groups (marco: developers; rick: developers, managers; scottc: developers, sales) plus hostile names. */
const LDIF = `dn: dc=solo,dc=io
objectClass: dcObject
objectClass: organization
o: solo.io
dc: solo

dn: ou=people,dc=solo,dc=io
objectClass: organizationalUnit
ou: people

dn: uid=marco,ou=people,dc=solo,dc=io
objectClass: inetOrgPerson
cn: Marco Schmidt
sn: Schmidt
uid: marco
userPassword: marcopwd

dn: uid=rick,ou=people,dc=solo,dc=io
objectClass: inetOrgPerson
cn: Rick Ducott
sn: Ducott
uid: rick
userPassword: rickpwd

dn: uid=scottc,ou=people,dc=solo,dc=io
objectClass: inetOrgPerson
cn: Scott Cranton
sn: Cranton
uid: scottc
userPassword: scottcpwd

dn: uid=a\\2Cb\\2Bc,ou=people,dc=solo,dc=io
objectClass: inetOrgPerson
cn: Comma Plus
sn: Plus
uid: a,b+c
userPassword: commapwd

dn: ou=groups,dc=solo,dc=io
objectClass: organizationalUnit
ou: groups

dn: cn=developers,ou=groups,dc=solo,dc=io
objectClass: groupOfNames
cn: developers
member: uid=marco,ou=people,dc=solo,dc=io
member: uid=rick,ou=people,dc=solo,dc=io
member: uid=scottc,ou=people,dc=solo,dc=io

dn: cn=sales,ou=groups,dc=solo,dc=io
objectClass: groupOfNames
cn: sales
member: uid=scottc,ou=people,dc=solo,dc=io

dn: cn=managers,ou=groups,dc=solo,dc=io
objectClass: groupOfNames
cn: managers
member: uid=rick,ou=people,dc=solo,dc=io
member: uid=a\\2Cb\\2Bc,ou=people,dc=solo,dc=io
`;

/** A running slapd. */
export interface Slapd {
  readonly port: number;
  /** `<host>:<port>` (Gloo's address form). */
  readonly address: string;
  stop(): Promise<void>;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: 30_000 }, (error, stdout, stderr) => (error ? reject(new Error(`${command} failed: ${stderr || error.message}`)) : resolve(stdout)));
  });
}

async function waitForPort(host: string, port: number, child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`slapd exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host, port }, () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`slapd did not listen on ${port} within ${timeoutMs}ms`);
}

/**
 * Starts slapd with a slapd.conf (`-f`) in a temporary directory: mdb database for dc=solo,dc=io,
 * the memberof overlay, and ACLs under which a user reads only its own entry (memberOf included,
 * except scottc, who may not read his groups) and the admin (rootdn) reads everything.
 */
export async function startSlapd(listen: { host?: string; port?: number } = {}): Promise<Slapd> {
  const host = listen.host ?? '127.0.0.1';
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-slapd-'));
  await mkdir(join(dir, 'data'));
  const conf = `include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile ${dir}/slapd.pid
database mdb
maxsize 10485760
suffix "dc=solo,dc=io"
rootdn "${ADMIN_DN}"
rootpw ${ADMIN_PASSWORD}
directory ${dir}/data
overlay memberof
access to attrs=userPassword by anonymous auth by self read by * none
access to dn.exact="uid=scottc,ou=people,dc=solo,dc=io" attrs=memberOf by * none
access to dn.subtree="ou=people,dc=solo,dc=io" by self read by * none
access to * by users read by * none
`;
  await writeFile(join(dir, 'slapd.conf'), conf);
  const port = listen.port ?? (await freePort());
  // -d 0: stay in the foreground (the test owns the process) without debug output.
  const child = spawn(SLAPD, ['-f', join(dir, 'slapd.conf'), '-h', `ldap://${host}:${port}/`, '-d', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  try {
    await waitForPort(host, port, child);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${(error as Error).message}: ${stderr}`);
  }
  const ldif = join(dir, 'data.ldif');
  await writeFile(ldif, LDIF);
  await run('/usr/bin/ldapadd', ['-x', '-H', `ldap://${host}:${port}`, '-D', ADMIN_DN, '-w', ADMIN_PASSWORD, '-f', ldif]);
  return {
    port,
    address: `${host}:${port}`,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
