import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The GraphiQL page served on a browser GET when introspection is enabled (SPEC 3.3). Its assets
 * come from the gateway itself, not a CDN (issue 25 item 11: the page was blank without internet):
 * GraphiQL's UMD bundle and React's, from the npm packages pinned in core/package.json, served at
 * `?graphiql-asset=<name>` on the API's own path (so the same route, auth included, serves them)
 * with a subresource-integrity hash in the page.
 */

/** An asset of the page. */
interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
  /** `sha384-…` (Subresource Integrity). */
  readonly integrity: string;
}

/** The assets by name: the package and the file inside it. */
const SOURCES: Readonly<Record<string, readonly [pkg: string, file: string, contentType: string]>> = {
  'react.js': ['react', 'umd/react.production.min.js', 'text/javascript; charset=utf-8'],
  'react-dom.js': ['react-dom', 'umd/react-dom.production.min.js', 'text/javascript; charset=utf-8'],
  'graphiql.js': ['graphiql', 'graphiql.min.js', 'text/javascript; charset=utf-8'],
  'graphiql.css': ['graphiql', 'graphiql.min.css', 'text/css; charset=utf-8'],
};

/** The query parameter naming an asset. */
export const ASSET_PARAMETER = 'graphiql-asset';

let assets: ReadonlyMap<string, Asset> | undefined;

/** Reads the assets once (about 4 MB, only once a page is asked for). */
function loadAssets(): ReadonlyMap<string, Asset> {
  if (assets) return assets;
  const require = createRequire(import.meta.url);
  const out = new Map<string, Asset>();
  for (const [name, [pkg, file, contentType]] of Object.entries(SOURCES)) {
    // Through package.json: React's `exports` do not list its UMD files.
    const body = readFileSync(join(dirname(require.resolve(`${pkg}/package.json`)), file));
    out.set(name, { body, contentType, integrity: `sha384-${createHash('sha384').update(body).digest('base64')}` });
  }
  assets = out;
  return out;
}

/** The asset a GET asks for with `?graphiql-asset=<name>`, or undefined (not an asset request, or an unknown name). */
export function graphiqlAsset(url: string): Asset | undefined | null {
  const q = url.indexOf('?');
  if (q < 0 || !url.includes(ASSET_PARAMETER)) return null;
  const name = new URLSearchParams(url.slice(q + 1)).get(ASSET_PARAMETER);
  if (name === null) return null;
  return Object.hasOwn(SOURCES, name) ? loadAssets().get(name) : undefined;
}

/** The page; it posts to its own URL. */
export function graphiqlPage(title: string): string {
  const safe = title.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const a = loadAssets();
  const src = (name: string) => `?${ASSET_PARAMETER}=${name}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${safe} · GraphiQL</title>
<link rel="stylesheet" href="${src('graphiql.css')}" integrity="${a.get('graphiql.css')!.integrity}">
</head>
<body style="margin:0">
<div id="graphiql" style="height:100vh"></div>
<script src="${src('react.js')}" integrity="${a.get('react.js')!.integrity}"></script>
<script src="${src('react-dom.js')}" integrity="${a.get('react-dom.js')!.integrity}"></script>
<script src="${src('graphiql.js')}" integrity="${a.get('graphiql.js')!.integrity}"></script>
<script>
  const fetcher = GraphiQL.createFetcher({ url: location.pathname });
  ReactDOM.createRoot(document.getElementById('graphiql')).render(React.createElement(GraphiQL, { fetcher }));
</script>
</body>
</html>
`;
}
