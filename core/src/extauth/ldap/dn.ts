/**
 * RFC 4514 (LDAP string representation of DNs), section 2.4: escaping an attribute value so that
 * text from a request can be placed in a DN template without changing the DN's structure.
 */

/** Characters left as they are; everything else becomes `\XX` per UTF-8 byte (RFC 4514 `hexpair`). */
const SAFE = /^[A-Za-z0-9._@-]$/;

/**
 * The value escaped for use as (part of) an RDN value: every character outside `[A-Za-z0-9._@-]`
 * is hex-escaped, which covers the specials `" + , ; < > \ =`, a leading `#` or space, a trailing
 * space, NUL, and also the filter specials `* ( )` (harmless in a DN, escaped all the same).
 */
export function escapeDnValue(value: string): string {
  let out = '';
  for (const char of value) {
    if (SAFE.test(char)) {
      out += char;
      continue;
    }
    for (const byte of Buffer.from(char, 'utf8')) out += `\\${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** A DN template with exactly one `%s`, filled with the escaped username. */
export function userDn(template: string, username: string): string {
  return template.replace('%s', () => escapeDnValue(username));
}

/**
 * A DN in a form for equality checks of group names: RDN separators without surrounding spaces,
 * attribute types and values lowercased (directory servers compare these attributes
 * case-insensitively: `cn`, `ou`, `dc`, `uid` have caseIgnoreMatch).
 */
export function normalizeDn(dn: string): string {
  return dn
    .split(/(?<!\\),/)
    .map((rdn) => rdn.trim().replace(/\s*=\s*/, '=').toLowerCase())
    .join(',');
}
