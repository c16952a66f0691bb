import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { CodedError } from '../errors.ts';
import { SDK_VERSION } from '../build/sdk-version.ts';
import { GATEWAY_VERSION } from '../version.ts';

/** `gatehouse-plugin init` failed (the directory is not empty, a bad name). */
export class InitError extends CodedError {
  override name = 'InitError';
}
export const PluginInitCodes = {
  /** DIR exists and is not empty. */
  NOT_EMPTY: 'GH_PLUGIN_INIT_NOT_EMPTY',
  /** `--name` is not a usable identifier. */
  BAD_NAME: 'GH_PLUGIN_BAD_NAME',
} as const;

/** Tool versions a new project gets: the ones this repository is tested with (a test holds them to the root package.json). */
export const PROJECT_TOOLS = { vitest: '^5.1.1', typescript: '^7.0.2', '@types/node': '^24.0.0' } as const;

export interface InitOptions {
  /** The project directory (created; must be empty if it exists). */
  dir: string;
  /** The plugin's name and exported symbol; default: the directory name in PascalCase. */
  name?: string;
  /** How package.json depends on the SDK: a version range (default `^<sdk version>`) or `file:/path/to/gatehouse-plugin-sdk-X.tgz`. */
  sdk?: string;
  /** How package.json depends on the plugin host `@gatehouse/core` (sandbox-mode tests): default `^<gateway version>`. */
  host?: string;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function pascalCase(text: string): string {
  const name = text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('');
  return /^[A-Za-z]/.test(name) ? name : `Plugin${name}`;
}

/** The files of a new project, by path. */
export function projectFiles(options: Required<Pick<InitOptions, 'name' | 'sdk' | 'host'>> & { packageName: string }): Record<string, string> {
  const { name, sdk, host, packageName } = options;
  const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
  return {
    'package.json': json({
      name: packageName,
      version: '0.1.0',
      private: true,
      type: 'module',
      description: `Gatehouse auth plugin ${name}`,
      engines: { node: '>=24' },
      scripts: {
        test: 'vitest run',
        typecheck: 'tsc -p tsconfig.json && tsc -p tsconfig.test.json',
        build: `gatehouse-plugin build src/index.ts --name ${name}`,
        'build:minified': `gatehouse-plugin build src/index.ts --name ${name} --minify`,
        image: `gatehouse-plugin image build --from compiled-auth-plugins --tag ${GATEWAY_VERSION} --output image-layout`,
      },
      devDependencies: {
        '@gatehouse/plugin-sdk': sdk,
        // The real plugin host: sandbox-mode tests run the plugin in it (isolated-vm).
        '@gatehouse/core': host,
        '@types/node': PROJECT_TOOLS['@types/node'],
        typescript: PROJECT_TOOLS.typescript,
        vitest: PROJECT_TOOLS.vitest,
      },
    }),
    // The plugin's sources see the sandbox's globals only: no DOM, no Node.js.
    'tsconfig.json': json({
      compilerOptions: {
        target: 'es2023',
        lib: ['es2023'],
        types: ['@gatehouse/plugin-sdk/sandbox'],
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        allowImportingTsExtensions: true,
        verbatimModuleSyntax: true,
        skipLibCheck: true,
      },
      include: ['src'],
      exclude: ['src/**/*.test.ts'],
    }),
    // Tests run in Node.js (they start servers, read files): Node's types there.
    'tsconfig.test.json': json({
      extends: './tsconfig.json',
      compilerOptions: { types: ['node'] },
      include: ['src/**/*.test.ts', 'vitest.config.ts'],
      exclude: [],
    }),
    'vitest.config.ts': `import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    // Sandbox mode runs the plugin in isolated-vm, which needs Node started with --no-node-snapshot.
    pool: 'forks',
    execArgv: ['--no-node-snapshot'],
    testTimeout: 30_000,
  },
});
`,
    '.gitignore': 'node_modules/\ncompiled-auth-plugins/\nimage-layout/\n',
    'src/index.ts': `import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The AuthConfig step's \`config\`, decoded onto NewConfigInstance()'s object (Go json.Unmarshal rules). */
export interface ${name}Config {
  /** Header that must be present; names are case-insensitive. */
  Header: string;
  /** Values that allow the request; list fields start as arrays, never {} (an empty object is a map). */
  AllowedValues: string[];
}

class ${name}Service implements AuthService {
  private readonly header: string;
  private readonly allowed: ReadonlySet<string>;

  constructor(config: ${name}Config) {
    this.header = config.Header.toLowerCase();
    this.allowed = new Set(config.AllowedValues);
  }

  Start(): void {}

  Authorize(ctx: Context, request: AuthorizationRequest): AuthorizationResponse {
    const value = request.CheckRequest.attributes.request.http.headers[this.header];
    if (value !== undefined && this.allowed.has(value)) return AuthorizedResponse({ 'x-${name.toLowerCase()}': 'allowed' });
    ctx.logger.debug('denied', { header: this.header, present: value !== undefined });
    return DeniedResponse(403, { 'content-type': 'text/plain' }, 'forbidden');
  }
}

/** Build with \`npm run build\`: compiled-auth-plugins/${name}.js (and its source map). */
export const ${name}: ExtAuthPlugin = {
  NewConfigInstance(): ${name}Config {
    return { Header: '', AllowedValues: [] };
  },

  GetAuthService(ctx, config) {
    const c = config as ${name}Config;
    if (c.Header === '') throw new Error('config.Header is required: the name of the header to check');
    ctx.logger.info('${name} configured', { header: c.Header, allowedValues: c.AllowedValues.length });
    return new ${name}Service(c);
  },
};
`,
    'src/index.test.ts': `import { afterEach, describe, expect, it } from 'vitest';
import { expectAllowed, expectDenied, startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// One suite, two modes: in-process (a node:vm context with exactly the sandbox's globals) and
// sandbox (built with the real compiler, run by the real host in its own isolate).
const entry = new URL('./index.ts', import.meta.url);
const config = { Header: 'X-Team', AllowedValues: ['core', 'edge'] };

describe.each(TEST_MODES)('${name} (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('allows an allowed value', async () => {
    plugin = await startPlugin(mode, { entry, name: '${name}', config });
    expectAllowed(await plugin.authorize({ headers: { 'x-team': 'core' } }), { 'x-${name.toLowerCase()}': 'allowed' });
  });

  it('denies anything else on its own (not because it threw)', async () => {
    plugin = await startPlugin(mode, { entry, name: '${name}', config });
    const decision = await plugin.authorize({ headers: { 'x-team': 'ops' } });
    expectDenied(decision, 403);
    expect(decision).toMatchObject({ body: 'forbidden' });
    expect(plugin.logs).toContainEqual({ level: 'debug', message: 'denied', fields: { header: 'x-team', present: true } });
  });

  it('refuses to start without a header', async () => {
    await expect(startPlugin(mode, { entry, name: '${name}', config: { AllowedValues: ['a'] } })).rejects.toMatchObject({ code: 'GH_PLUGIN_INIT_FAILED' });
  });
});
`,
    'README.md': `# ${name}

A Gatehouse auth plugin (gateway ${GATEWAY_VERSION}), made with \`gatehouse-plugin init\`.

\`\`\`sh
npm install
npm test            # the test kit, in-process and in the real sandbox
npm run typecheck   # src/ against the sandbox's globals only (no DOM, no Node.js)
npm run build       # compiled-auth-plugins/${name}.js + ${name}.js.map
npm run image       # an OCI image layout; push it with gatehouse-plugin image push --from image-layout REF
\`\`\`

Reference it from an AuthConfig:

\`\`\`yaml
configs:
  - pluginAuth:
      name: ${name}
      config:
        Header: x-team
        AllowedValues: [core, edge]
\`\`\`

Needs Node.js 24 or newer. Guide: docs/plugins.md of the Gatehouse repository.
`,
  };
}

/** Scaffolds a standalone plugin project (`gatehouse-plugin init DIR`); returns the files written. */
export async function initProject(options: InitOptions): Promise<{ dir: string; name: string; files: string[] }> {
  const dir = resolve(options.dir);
  const name = options.name ?? pascalCase(basename(dir));
  if (!IDENTIFIER.test(name)) throw new InitError(PluginInitCodes.BAD_NAME, `--name ${JSON.stringify(name)} is not usable: the plugin is exported under it, so use a JavaScript identifier such as MyPlugin`);
  if (existsSync(dir) && (await readdir(dir)).length > 0) throw new InitError(PluginInitCodes.NOT_EMPTY, `${dir} is not empty; pick a new directory (gatehouse-plugin init never overwrites files)`);
  const packageName = basename(dir).toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[._-]+/, '') || 'gatehouse-plugin';
  const files = projectFiles({ name, sdk: options.sdk ?? `^${SDK_VERSION}`, host: options.host ?? `^${GATEWAY_VERSION}`, packageName });
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text, { flag: 'wx' });
  }
  return { dir, name, files: Object.keys(files) };
}
