import { describe, expect, it } from 'vitest';
import { escapeDnValue, normalizeDn, userDn } from './dn.ts';
import { ldapUrl } from './ldap-step.ts';

describe('RFC 4514 escaping', () => {
  it('hex-escapes every DN and filter special, leading # and spaces, NUL; keeps plain names', () => {
    expect(escapeDnValue('rick')).toBe('rick');
    expect(escapeDnValue('a.b-c_d@x')).toBe('a.b-c_d@x');
    expect(escapeDnValue('a,b')).toBe('a\\2cb');
    expect(escapeDnValue('*)(uid=*')).toBe('\\2a\\29\\28uid\\3d\\2a');
    expect(escapeDnValue(' #x ')).toBe('\\20\\23x\\20');
    expect(escapeDnValue('"+;<>\\\u0000')).toBe('\\22\\2b\\3b\\3c\\3e\\5c\\00');
    expect(escapeDnValue('é')).toBe('\\c3\\a9');
  });

  it('the template gets exactly one escaped value, whatever the username holds ($&, %s)', () => {
    expect(userDn('uid=%s,ou=people,dc=solo,dc=io', 'admin,dc=evil')).toBe('uid=admin\\2cdc\\3devil,ou=people,dc=solo,dc=io');
    expect(userDn('uid=%s,dc=x', '$&%s')).toBe('uid=\\24\\26\\25s,dc=x');
  });

  it('normalizes group DNs for comparison (case, spaces around separators) without splitting escaped commas', () => {
    expect(normalizeDn('CN=Sales, OU=groups ,DC=solo')).toBe('cn=sales,ou=groups,dc=solo');
    expect(normalizeDn('cn=a\\,b,dc=x')).toBe('cn=a\\,b,dc=x');
  });

  it('addresses: host:port (Gloo) and ldap(s) URLs; credentials, paths and queries are refused', () => {
    expect(ldapUrl('ldap.default.svc.cluster.local:389')).toBe('ldap://ldap.default.svc.cluster.local:389');
    expect(ldapUrl('ldaps://ldap.example:636')).toBe('ldaps://ldap.example:636');
    expect(ldapUrl('LDAP://Ldap.Example')).toBe('ldap://ldap.example');
    expect(ldapUrl('ldap://u:p@ldap.example:389')).toBeUndefined();
    expect(ldapUrl('ldap://ldap.example:389/dc=x')).toBeUndefined();
    expect(ldapUrl('ldap://ldap.example:389?x')).toBeUndefined();
  });
});
