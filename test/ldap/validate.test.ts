/**
 * `gatehouse validate` on ldap / ldapInternal / hmacAuth / opa manifests: both protojson spellings
 * load, both at once are rejected naming the field, and every accepted-but-not-honoured field
 * is a warning naming it.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir } from '../support/config-dir.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

async function validate(yaml: string): Promise<{ code: number; out: string }> {
  const dir = await makeConfigDir({ 'a.yaml': yaml });
  try {
    return await new Promise((resolve) => {
      execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir.path], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
  } finally {
    await dir.cleanup();
  }
}

const head = (name: string) => `apiVersion: enterprise.gloo.solo.io/v1\nkind: AuthConfig\nmetadata: { name: ${name}, namespace: gloo-system }\nspec:\n  configs:\n`;

it('proto (snake_case) names load like the JSON names; both spellings of one field are rejected', { timeout: 60_000 }, async () => {
  const snake = await validate(`${head('snake')}  - ldap:
      address: "ldap.example:389"
      userDnTemplate: "uid=%s,dc=x"
      disable_group_checking: true
  - hmacAuth:
      secret_refs: { secret_refs: [{ name: creds }] }
      parameters_in_headers: {}
  - opaServerAuth:
      package: test
      rule_name: allow
      server_addr: opa:8181
      options: { fast_input_conversion: true }
---
apiVersion: v1
kind: Secret
metadata: { name: creds, namespace: gloo-system }
type: extauth.solo.io/accountcredentials
stringData: { username: k, password: s }
`);
  expect(snake.code, snake.out).toBe(0);
  const both = await validate(`${head('both')}  - ldap:
      address: "ldap.example:389"
      userDnTemplate: "uid=%s,dc=x"
      disableGroupChecking: true
      disable_group_checking: false
`);
  expect(both.code).toBe(1);
  // config/proto-names.ts rejects the second spelling, at the proto name.
  expect(both.out).toMatch(/spec\.configs\[0\]\.ldap\.disable_group_checking.*"disable_group_checking" and "disableGroupChecking" are the same field/);
});

it('warnings name every accepted-but-not-honoured field; bad templates, addresses and Secrets are errors', { timeout: 60_000 }, async () => {
  const warn = await validate(`${head('warn')}  - ldap:
      address: "ldap://ldap.example:389"
      userDnTemplate: "uid=%s,dc=x"
      pool: { initialSize: 2 }
  - ldapInternal:
      address: "ldap.example:389"
      userDnTemplate: "uid=%s,dc=x"
      allowedGroups: [cn=a]
      groupLookupSettings: { username: "cn=admin", password: p, checkGroupsWithServiceAccount: true }
  - opaServerAuth:
      package: test
      options: { return_decision_reason: true }
`);
  expect(warn.code, warn.out).toBe(0);
  expect(warn.out).toMatch(/warning: .*spec\.configs\[0\]\.ldap\.allowedGroups: is empty/);
  expect(warn.out).toMatch(/warning: .*spec\.configs\[0\]\.ldap\.pool\.initialSize: accepted but not honoured/);
  expect(warn.out).toMatch(/warning: .*spec\.configs\[1\]\.ldapInternal\.groupLookupSettings\.password: the service account password is written in the AuthConfig/);
  expect(warn.out).toMatch(/warning: .*spec\.configs\[2\]\.opaServerAuth\.options\.returnDecisionReason: accepted but not honoured/);

  const bad = await validate(`${head('bad')}  - ldap:
      address: "ldap://user:pw@ldap.example:389/dc=x"
      userDnTemplate: "uid=%s,ou=%s"
  - hmacAuth:
      secretRefs: { secretRefs: [{ name: nokeys }] }
  - opaServerAuth:
      package: "test/../../admin"
---
apiVersion: v1
kind: Secret
metadata: { name: nokeys, namespace: gloo-system }
stringData: { password: s }
`);
  expect(bad.code).toBe(1);
  expect(bad.out).toMatch(/spec\.configs\[0\]\.ldap\.address: must be host:port or an ldap/);
  expect(bad.out).toMatch(/spec\.configs\[0\]\.ldap\.userDnTemplate: must contain "%s" exactly once/);
  expect(bad.out).toMatch(/spec\.configs\[1\]\.hmacAuth\.secretRefs\.secretRefs\[0\]: Secret gloo-system\/nokeys needs the keys "username"/);
  expect(bad.out).toMatch(/spec\.configs\[2\]\.opaServerAuth: serverAddr must be/);
});
