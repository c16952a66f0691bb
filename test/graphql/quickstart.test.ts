import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseManifests } from '../../core/src/config/manifest.ts';
import { ConfigStore } from '../../core/src/config/store.ts';
import { checkGraphQLApi } from '../../core/src/graphql/index.ts';

const CONFIG = fileURLToPath(new URL('../../examples/quickstart/config/', import.meta.url));

describe('quickstart GraphQL manifests', () => {
  it('are all accepted, with the GraphQL check', async () => {
    const documents = [];
    for (const file of (await readdir(CONFIG)).filter((f) => /\.ya?ml$/.test(f))) {
      const parsed = parseManifests(file, await readFile(CONFIG + file, 'utf8'));
      expect(parsed.diagnostics).toEqual([]);
      documents.push(...parsed.documents);
    }
    const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: { GraphQLApi: checkGraphQLApi } }).load(documents);
    const graphql = snapshot.statuses.filter((s) => s.kind === 'GraphQLApi' || s.file?.startsWith('graphql-'));
    expect(graphql.map((s) => [s.kind, s.name, s.state, s.reasons])).toEqual(
      expect.arrayContaining([
        ['GraphQLApi', 'users', 'Accepted', []],
        ['GraphQLApi', 'books', 'Accepted', []],
        ['VirtualService', 'graphql', 'Accepted', []],
      ]),
    );
    expect(graphql.filter((s) => s.state !== 'Accepted')).toEqual([]);
  });
});
