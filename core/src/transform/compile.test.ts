import { describe, expect, test } from 'vitest';
import { applyRequestStages, applyResponseStages } from './apply.ts';
import { compileStages, compileTransformation, TransformConfigError, transformProblems, type TransformOutcome, type TransformedRequest, type TransformRequest } from './compile.ts';
import type { TransformationSpec, TransformationTemplateSpec } from './schema.ts';

/** The transformation engine: Gloo's proto semantics, Envoy-Gloo's functions, and hostile input. */

function request(template: TransformationTemplateSpec, limits?: { maxBodyBytes?: number; maxRenderSteps?: number; maxOutputChars?: number; maxRegexInputChars?: number }) {
  return compileTransformation({ transformationTemplate: template }, { side: 'request', path: 't', env: { GREETING: 'hello' }, ...(limits ? { limits } : {}) });
}

function req(headers: Record<string, string | string[]> = {}, body?: string | Buffer, path = '/p?q=1'): TransformRequest {
  return { method: 'POST', path, headers: { host: 'h.test', ...headers }, body };
}

function ok<M>(outcome: TransformOutcome<M>) {
  if (!outcome.ok) throw new Error(`${outcome.code}: ${outcome.message}`);
  return outcome;
}

function header(template: string, input = req(), extra: Partial<TransformationTemplateSpec> = {}): string | string[] | undefined {
  return ok(request({ headers: { 'x-out': { text: template } }, ...extra }).transformRequest(input)).message.headers['x-out'];
}

function configError(fn: () => unknown): { path: string; message: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof TransformConfigError) return { path: error.path, message: error.message };
    throw error;
  }
  throw new Error('expected a TransformConfigError');
}

describe("Gloo's template functions (envoy-gloo inja_transformer.cc)", () => {
  test('header() reads the first value, case-insensitively, pseudo-headers included; missing is empty', () => {
    expect(header('{{ header("X-A") }}|{{ header(":method") }}|{{ header(":path") }}|{{ header(":authority") }}|{{ header("none") }}', req({ 'x-a': ['1', '2'] }))).toBe('1|POST|/p?q=1|h.test|');
  });

  test('request_header() on a response reads the request', () => {
    const t = compileTransformation({ transformationTemplate: { headers: { 'x-r': { text: '{{ request_header("x-in") }}-{{ header(":status") }}' } } } }, { side: 'response', path: 't', env: {} });
    expect(ok(t.transformResponse({ status: 201, headers: {} }, req({ 'x-in': 'from-request' }))).message.headers['x-r']).toBe('from-request-201');
    // Without the request (a local reply before any request was sent), request_header() is empty.
    expect(ok(t.transformResponse({ status: 201, headers: { 'x-in': 'response-side' } })).message.headers['x-r']).toBe('-201');
  });

  test('env() reads the environment as it was at load; unknown is empty', () => {
    expect(header('{{ env("GREETING") }}|{{ env("NOPE") }}')).toBe('hello|');
  });

  test('base64_encode/decode (invalid input decodes to empty), base64url variants', () => {
    expect(header('{{ base64_encode("hi there") }}|{{ base64_decode("aGkgdGhlcmU=") }}|{{ base64_decode("!!not base64") }}|{{ base64url_encode("??>") }}|{{ base64url_decode("Pz8-") }}')).toBe('aGkgdGhlcmU=|hi there||Pz8-|??>');
  });

  test('substring: start, optional length, out of range empty, length <= 0 to the end', () => {
    expect(header('{{ substring("abcdef", 2) }}|{{ substring("abcdef", 2, 2) }}|{{ substring("abcdef", 9) }}|{{ substring("abcdef", 1, 0) }}|{{ substring("abcdef", 4, 99) }}|{{ substring("abc", "1") }}')).toBe('cdef|cd||bcdef|ef|');
  });

  test('trim, raw_string, word_count, data_source, replace_with_random', () => {
    expect(header('[{{ trim("  a b \\t") }}]|{{ raw_string("say \\"x\\"") }}|{{ word_count("  one two  three ") }}|{{ word_count(xs) }}|{{ data_source("a") }}', req({}, JSON.stringify({ xs: ['a b', { k: 'c d' }, 1] })))).toBe('[a b]|say \\"x\\"|3|6|');
    const t = request({ headers: { 'x-a': { text: '{{ replace_with_random("id-XX-XX", "XX") }}' } } });
    const first = ok(t.transformRequest(req())).message.headers['x-a'] as string;
    expect(first).toMatch(/^id-([A-Za-z0-9+/]{22})-\1$/);
    // One random value per pattern per transformation, as Envoy-Gloo keeps it.
    expect(ok(t.transformRequest(req())).message.headers['x-a']).toBe(first);
  });

  test('context() is the parsed body (an array body is reachable only through it); body() the raw text', () => {
    expect(header('{% for x in context() %}{{ x.n }}{% endfor %}|{{ length(body()) }}', req({}, '[{"n":1},{"n":2}]'))).toBe('12|17');
  });
});

describe('bytes, as Envoy sees them', () => {
  const latin1 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');

  test('UTF-8 from a JSON body reaches a header as its bytes; length counts bytes, as Inja does', () => {
    const t = request({ headers: { 'x-name': { text: '{{ name }}' }, 'x-len': { text: '{{ length(name) }}' } } });
    const out = ok(t.transformRequest(req({}, Buffer.from(JSON.stringify({ name: '日本é' })))));
    expect(out.message.headers['x-name']).toBe(latin1('日本é'));
    expect(out.message.headers['x-len']).toBe('8');
  });

  test('JSON \\u escapes come out as UTF-8', () => {
    const t = request({ body: { text: '{{ a }}|{{ b }}|{{ c }}' } });
    const out = ok(t.transformRequest(req({}, '{"a":"caf\\u00e9","b":"\\u65e5","c":"back\\\\u00e9"}')));
    expect(out.body?.toString('utf8')).toBe('café|日|back\\u00e9');
  });

  test('binary bodies pass through a template unchanged', () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a]);
    const out = ok(request({ parseBodyBehavior: 'DontParse', body: { text: '{{ body() }}' } }).transformRequest(req({}, bytes)));
    expect(out.body?.equals(bytes)).toBe(true);
  });

  test('non-ASCII template text and header values keep their UTF-8 bytes; dynamic metadata and span names are Unicode text', () => {
    const t = request({
      body: { text: 'héllo {{ header("x-in") }}' },
      dynamicMetadataValues: [{ key: 'who', value: { text: '{{ header("x-in") }}·' } }],
      spanTransformer: { name: { text: 'span {{ header("x-in") }}' } },
    });
    // Node hands header values over as latin1: the client's UTF-8 bytes of "José".
    const out = ok(t.transformRequest(req({ 'x-in': latin1('José') })));
    expect(out.body?.toString('utf8')).toBe('héllo José');
    expect(out.dynamicMetadata['io.solo.transformation']).toEqual({ who: 'José·' });
    expect(out.spanName).toBe('span José');
  });
});

describe('TransformationTemplate fields', () => {
  test('headers replace, headersToRemove removes, headersToAppend appends (the proto comment\'s example)', () => {
    const t = request({
      headers: { 'x-header-one': { text: 'first {{ "inja" }} template' }, 'x-empty': { text: '{{ header("absent") }}' } },
      headersToRemove: ['x-drop'],
      headersToAppend: [
        { key: 'x-header-one', value: { text: 'first appended {{ "inja" }} template' } },
        { key: 'x-header-one', value: { text: 'second appended {{ "inja" }} template' } },
      ],
    });
    const out = ok(t.transformRequest(req({ 'x-header-one': 'original', 'x-drop': 'gone', 'x-empty': 'was here' }))).message.headers;
    expect(out['x-header-one']).toEqual(['first inja template', 'first appended inja template', 'second appended inja template']);
    expect(out['x-drop']).toBeUndefined();
    // A header rendered empty is removed and not set (Envoy-Gloo).
    expect(out['x-empty']).toBeUndefined();
  });

  test('the body is JSON-parsed only when a template reads it: a bad body is 400 then, and ignored otherwise', () => {
    const reads = request({ headers: { 'x-a': { text: '{{ a }}' } } });
    expect(reads.needsBody).toBe(true);
    expect(reads.transformRequest(req({}, 'not json'))).toMatchObject({ ok: false, status: 400, code: 'GH_TRANSFORM_BAD_JSON' });
    const headersOnly = request({ headers: { 'x-a': { text: '{{ header("b") }}' } } });
    expect(headersOnly.needsBody).toBe(false);
    expect(ok(headersOnly.transformRequest(req({ b: 'v' }, 'not json'))).message.headers['x-a']).toBe('v');
    expect(header('{{ default(a, "none") }}', req({}, 'not json'), { ignoreErrorOnParse: true })).toBe('none');
    expect(header('{{ body() }}', req({}, 'plain {text}'), { parseBodyBehavior: 'DontParse' })).toBe('plain {text}');
  });

  test('needsBody: body extractors, body templates and merges need it; passthrough never does', () => {
    expect(request({ extractors: { e: { body: {}, regex: '.*' } } }).needsBody).toBe(true);
    expect(request({ extractors: { e: { header: 'x', regex: '.*' } }, headers: { 'x-a': { text: '{{ e }}' } } }).needsBody).toBe(false);
    expect(request({ body: { text: 'constant' } }).needsBody).toBe(false);
    expect(request({ body: { text: 'constant' } }).changesBody).toBe(true);
    expect(request({ mergeExtractorsToBody: {} }).needsBody).toBe(true);
    expect(request({ passthrough: {}, headers: { 'x-a': { text: '{{ a }}' } } }).needsBody).toBe(false);
    expect(compileTransformation({ headerBodyTransform: {} }, { side: 'request', path: 't' }).needsBody).toBe(true);
  });

  test('mergeJsonKeys renders each key as JSON into the body; empty is skipped unless overrideEmpty', () => {
    const t = request({ mergeJsonKeys: { jsonKeys: { added: { tmpl: { text: '"{{ header("x") }}"' } }, skipped: { tmpl: { text: '' } }, nulled: { tmpl: { text: '' }, overrideEmpty: true } } } });
    // overrideEmpty with an empty rendering: the empty text is not JSON, which Envoy-Gloo reports as an error (400).
    expect(t.transformRequest(req({ x: 'v' }, '{"a":1}'))).toMatchObject({ ok: false, status: 400 });
    const fine = request({ mergeJsonKeys: { jsonKeys: { added: { tmpl: { text: '"{{ header("x") }}"' } }, skipped: { tmpl: { text: '' } } } } });
    expect(JSON.parse(String(ok(fine.transformRequest(req({ x: 'v' }, '{"a":1}'))).body))).toEqual({ a: 1, added: 'v' });
    expect(configError(() => request({ mergeJsonKeys: { jsonKeys: { 'a.b': { tmpl: { text: '1' } } } } })).path).toBe('t.transformationTemplate.mergeJsonKeys.jsonKeys.a.b');
    expect(configError(() => request({ parseBodyBehavior: 'DontParse', mergeJsonKeys: {} })).path).toBe('t.transformationTemplate.mergeJsonKeys');
  });

  test('headerBodyTransform: headers and body into JSON; addRequestMetadata adds the request line', () => {
    const t = compileTransformation({ headerBodyTransform: { addRequestMetadata: true } }, { side: 'request', path: 't' });
    const out = ok(t.transformRequest({ method: 'PUT', path: '/a/b?x=1&x=2&y=3', headers: { host: 'h.test', 'x-m': ['1', '2'] }, body: 'raw' }));
    expect(JSON.parse(String(out.body))).toEqual({
      body: 'raw',
      headers: { ':authority': 'h.test', ':method': 'PUT', ':path': '/a/b?x=1&x=2&y=3', ':scheme': 'http', 'x-m': '2' },
      multiValueHeaders: { 'x-m': ['1', '2'] },
      queryString: 'x=1&x=2&y=3',
      httpMethod: 'PUT',
      path: '/a/b',
      queryStringParameters: { x: '2', y: '3' },
      multiValueQueryStringParameters: { x: ['1', '2'] },
    });
    expect(out.message.headers['content-type']).toBe('application/json');
  });

  test('dynamic metadata: default namespace, jsonToProto parses JSON, empty renders are skipped', () => {
    const t = request({ dynamicMetadataValues: [{ key: 'plain', value: { text: '{{ header("a") }}' } }, { key: 'parsed', jsonToProto: true, value: { text: '{"n": 1}' } }, { key: 'empty', value: { text: '' } }] });
    expect(ok(t.transformRequest(req({ a: 'v' }))).dynamicMetadata).toEqual({ 'io.solo.transformation': { plain: 'v', parsed: { n: 1 } } });
  });
});

describe('configuration errors carry the field path', () => {
  test('bad templates, regexes, header names and pseudo-headers', () => {
    expect(configError(() => request({ headers: { 'x-a': { text: '{% if %}' } } })).path).toBe('t.transformationTemplate.headers.x-a.text');
    expect(configError(() => request({ body: { text: '{{ nosuch() }}' } })).path).toBe('t.transformationTemplate.body.text');
    expect(configError(() => request({ extractors: { e: { header: 'x', regex: '(a)\\1' } } }))).toEqual({ path: 't.transformationTemplate.extractors.e.regex', message: expect.stringMatching(/backreference/) });
    expect(configError(() => request({ extractors: { e: { header: 'x', regex: '(?=a)' } } })).message).toMatch(/lookahead/);
    expect(configError(() => request({ extractors: { e: { header: 'x', regex: '(a)', subgroup: 2 } } })).path).toBe('t.transformationTemplate.extractors.e.subgroup');
    expect(configError(() => request({ extractors: { e: { regex: '.*' } } })).message).toMatch(/exactly one source/);
    expect(configError(() => request({ headers: { 'bad header': { text: 'x' } } })).path).toBe('t.transformationTemplate.headers.bad header');
    expect(configError(() => request({ headers: { ':status': { text: '200' } } })).message).toMatch(/request transformations cannot set the pseudo-header :status/);
    expect(configError(() => compileTransformation({ transformationTemplate: { headers: { ':path': { text: '/' } } } }, { side: 'response', path: 'r' })).path).toBe('r.transformationTemplate.headers.:path');
    expect(configError(() => compileTransformation({ transformationTemplate: { spanTransformer: { name: { text: 'x' } } } }, { side: 'response', path: 'r' })).path).toBe('r.transformationTemplate.spanTransformer');
  });

  test('transformProblems reports the first problem with its path and code, for validation', () => {
    expect(transformProblems({ stagedTransformations: { early: { requestTransforms: [{ matcher: { regex: '(a' }, requestTransformation: {} }] } } }, 'spec.options')).toEqual([{ code: 'GH_TRANSFORM_INVALID', path: 'spec.options.stagedTransformations.early.requestTransforms[0].matcher.regex', message: expect.stringMatching(/invalid regular expression/), severity: 'error' }]);
    expect(transformProblems({ transformations: { requestTransformation: { transformationTemplate: { headers: { a: { text: 'ok' } } } } } }, 'spec.options')).toEqual([]);
  });

  test('functions whose data Gatehouse lacks are accepted with a warning naming the field', () => {
    expect(transformProblems({ transformations: { requestTransformation: { transformationTemplate: { headers: { a: { text: '{{ data_source("x") }}{{ cluster_metadata("k") }}' } } } } } }, 'o')).toEqual([
      { code: 'GH_CONFIG_IGNORED', path: 'o.transformations.requestTransformation.transformationTemplate.headers.a.text', message: expect.stringMatching(/^data_source\(\) always renders an empty string/), severity: 'warning' },
      { code: 'GH_CONFIG_IGNORED', path: 'o.transformations.requestTransformation.transformationTemplate.headers.a.text', message: expect.stringMatching(/^cluster_metadata\(\)/), severity: 'warning' },
    ]);
  });

  test('logRequestResponseInfo: per transformation, overridden by the stage-level setting', () => {
    const own = compileStages({ stagedTransformations: { regular: { requestTransforms: [{ requestTransformation: { logRequestResponseInfo: true } }] } } }, 'o');
    expect(own.regular.selectRequest({ method: 'GET', path: '/', query: '', headers: {} })?.request?.logRequestResponseInfo).toBe(true);
    const staged = compileStages({ stagedTransformations: { logRequestResponseInfo: false, regular: { requestTransforms: [{ requestTransformation: { logRequestResponseInfo: true } }] } } }, 'o');
    expect(staged.regular.selectRequest({ method: 'GET', path: '/', query: '', headers: {} })?.request?.logRequestResponseInfo).toBe(false);
  });
});

describe('stages: matchers on the request, and on response headers and :status', () => {
  const set = (name: string, value: string): TransformationSpec => ({ transformationTemplate: { headers: { [name]: { text: value } } } });

  test('the first matching request entry runs; its response transformation wins over responseTransforms', () => {
    const stages = compileStages(
      {
        stagedTransformations: {
          regular: {
            requestTransforms: [
              { matcher: { prefix: '/a', methods: ['GET'] }, requestTransformation: set('x-which', 'a'), responseTransformation: set('x-resp', 'from-a') },
              { matcher: { prefix: '/', headers: [{ name: 'x-h', value: 'v.*', regex: true }] }, requestTransformation: set('x-which', 'h') },
            ],
            responseTransforms: [
              { matchers: [{ name: ':status', value: '404' }], responseTransformation: set('x-resp', 'not-found') },
              { matchers: [{ name: 'x-up', value: 'yes' }], responseTransformation: set('x-resp', 'header') },
            ],
          },
        },
      },
      'o',
    );
    const run = (method: string, path: string, headers: Record<string, string>, status: number, responseHeaders: Record<string, string> = {}) => {
      const sent = applyRequestStages(stages, { method, path, headers });
      if (!sent.ok) throw new Error(sent.message);
      const back = applyResponseStages(stages, sent.selections, { status, headers: responseHeaders }, sent.request);
      if (!back.ok) throw new Error(back.message);
      return [sent.request.headers['x-which'], back.response.headers['x-resp']];
    };
    expect(run('GET', '/a/1', {}, 404)).toEqual(['a', 'from-a']);
    expect(run('POST', '/a/1', { 'x-h': 'value' }, 404)).toEqual(['h', 'not-found']);
    expect(run('POST', '/b', {}, 200, { 'x-up': 'yes' })).toEqual([undefined, 'header']);
    expect(run('POST', '/b', {}, 200)).toEqual([undefined, undefined]);
  });

  test('early runs before regular on requests, and after it on responses', () => {
    const append = (v: string): TransformationSpec => ({ transformationTemplate: { headers: { 'x-order': { text: `{{ header("x-order") }}${v}` } } } });
    const stages = compileStages({ stagedTransformations: { early: { requestTransforms: [{ requestTransformation: append('E'), responseTransformation: append('e') }] }, regular: { requestTransforms: [{ requestTransformation: append('R'), responseTransformation: append('r') }] } } }, 'o');
    const sent = applyRequestStages(stages, { method: 'GET', path: '/', headers: {} });
    if (!sent.ok) throw new Error();
    expect(sent.request.headers['x-order']).toBe('ER');
    const back = applyResponseStages(stages, sent.selections, { status: 200, headers: {} });
    if (!back.ok) throw new Error();
    expect(back.response.headers['x-order']).toBe('re');
  });

  test('transformations is the regular stage, and is ignored (with a warning) when stagedTransformations.regular is set, as Gloo translates it', () => {
    const both = compileStages({ transformations: { requestTransformation: set('x-legacy', 'yes') }, stagedTransformations: { regular: { requestTransforms: [{ matcher: { prefix: '/staged' }, requestTransformation: set('x-staged', 'yes') }] } } }, 'o');
    expect(both.warnings).toEqual([{ path: 'o.transformations', message: expect.stringMatching(/ignored: stagedTransformations.regular is set/) }]);
    const sent = applyRequestStages(both, { method: 'GET', path: '/other', headers: {} });
    expect(sent.ok && sent.request.headers['x-legacy']).toBe(undefined);
    const withEarly = compileStages({ transformations: { requestTransformation: set('x-legacy', 'yes') }, stagedTransformations: { early: { requestTransforms: [{ requestTransformation: set('x-early', 'yes') }] } } }, 'o');
    expect(withEarly.warnings).toEqual([]);
    const out = applyRequestStages(withEarly, { method: 'GET', path: '/', headers: {} });
    expect(out.ok && [out.request.headers['x-early'], out.request.headers['x-legacy']]).toEqual(['yes', 'yes']);
  });

    test('clearRouteCache is reported when the entry applied', () => {
    const stages = compileStages({ transformations: { clearRouteCache: true, requestTransformation: set(':path', '/new') } }, 'o');
    const sent = applyRequestStages(stages, { method: 'GET', path: '/old', headers: {} });
    expect(sent).toMatchObject({ ok: true, clearRouteCache: true, request: { path: '/new' } });
  });
});

describe('hostile input: bounded time and memory, clear failures', () => {
  test('a body over maxBodyBytes is 413 before anything is parsed', () => {
    const t = request({ body: { text: '{{ body() }}' } }, { maxBodyBytes: 1024 });
    expect(t.transformRequest(req({}, Buffer.alloc(1025, 'a')))).toMatchObject({ ok: false, status: 413, code: 'GH_TRANSFORM_BODY_TOO_LARGE' });
    expect(ok(t.transformRequest(req({}, Buffer.alloc(1024, 'a')))).body?.length).toBe(1024);
  });

  test('a body template cannot build a body over the limit', () => {
    const t = request({ body: { text: '{% for i in range(100) %}{{ body() }}{% endfor %}' } }, { maxBodyBytes: 1000 });
    expect(t.transformRequest(req({}, 'x'.repeat(500)))).toMatchObject({ ok: false, status: 400, code: 'GH_TRANSFORM_BUDGET' });
  });

  test('catastrophic-backtracking regexes run in linear time on RE2', () => {
    const t = request({ extractors: { e: { body: {}, regex: '(a+)+$' }, f: { header: 'x-a', regex: '(x+x+)+y', mode: 'REPLACE_ALL', replacementText: '-' } }, parseBodyBehavior: 'DontParse', headers: { 'x-e': { text: '[{{ e }}]' }, 'x-f': { text: '{{ f }}' } } });
    const out = ok(t.transformRequest(req({ 'x-a': `${'x'.repeat(50_000)}z` }, `${'a'.repeat(100_000)}!`)));
    expect(out.message.headers['x-e']).toBe('[]');
    expect(out.message.headers['x-f']).toBe(`${'x'.repeat(50_000)}z`);
  });

  test('an extractor source over maxRegexInputChars is a 400, not a long regex run', () => {
    const t = request({ parseBodyBehavior: 'DontParse', extractors: { e: { body: {}, regex: '.*(b).*', subgroup: 1 } }, headers: { 'x-e': { text: '{{ e }}' } } }, { maxRegexInputChars: 1000 });
    expect(ok(t.transformRequest(req({}, `${'a'.repeat(998)}b`))).message.headers['x-e']).toBe('b');
    expect(t.transformRequest(req({}, `${'a'.repeat(1000)}b`))).toMatchObject({ ok: false, status: 400, code: 'GH_TRANSFORM_BUDGET' });
  });

  test('a loop over a large body array stops at the step budget: 400, not a stall', () => {
    const t = request({ body: { text: '{% for a in context() %}{% for b in context() %}{{ a }}{% endfor %}{% endfor %}' } });
    const body = JSON.stringify(Array.from({ length: 100_000 }, (_, i) => i % 10));
    expect(t.transformRequest(req({}, body))).toMatchObject({ ok: false, status: 400, code: 'GH_TRANSFORM_BUDGET' });
  });

  test('deeply nested JSON bodies: word_count and printing end cleanly', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    const count = request({ headers: { 'x-n': { text: '{{ word_count(context()) }}' } } });
    const counted = count.transformRequest(req({}, deep));
    expect(counted.ok ? counted.message.headers['x-n'] : counted.code).toMatch(/^(GH_TRANSFORM_BUDGET|0)$/);
    const printed = request({ body: { text: '{{ context() }}' } }).transformRequest(req({}, deep));
    expect(printed.ok ? 'printed' : printed.code).toMatch(/^(GH_TRANSFORM_BUDGET|printed)$/);
  });

  test('a deeply nested body merged with extractors ends in a 400 or a body, never a throw', () => {
    const deep = `{"a":${'['.repeat(300_000)}${']'.repeat(300_000)}}`;
    const t = request({ mergeExtractorsToBody: {}, extractors: { e: { header: 'x-a', regex: '.*' } } }, { maxBodyBytes: 4 * 1024 * 1024 });
    const out = t.transformRequest(req({ 'x-a': 'v' }, deep));
    expect(out.ok ? 'merged' : out.code).toMatch(/^(merged|GH_TRANSFORM_BUDGET)$/);
  });

    test('rendered headers cannot inject CR/LF; :status and :path must stay valid', () => {
    expect(request({ headers: { 'x-a': { text: '{{ header("x-in") }}' } } }).transformRequest(req({ 'x-in': 'ok' }))).toMatchObject({ ok: true });
    expect(request({ headers: { 'x-a': { text: '{{ base64_decode("YQ0KU2V0LUNvb2tpZTogeD0x") }}' } } }).transformRequest(req())).toMatchObject({ ok: false, status: 400, code: 'GH_TRANSFORM_RENDER' });
    expect(request({ headers: { ':path': { text: 'no-slash' } } }).transformRequest(req())).toMatchObject({ ok: false, status: 400 });
    expect(request({ headers: { ':method': { text: 'GE T' } } }).transformRequest(req())).toMatchObject({ ok: false, status: 400 });
    const status = compileTransformation({ transformationTemplate: { headers: { ':status': { text: '{% if false %}400{% endif %}' } } } }, { side: 'response', path: 'r' });
    // Gloo's guide warns that an empty :status crashes Envoy; here it is a 400.
    expect(status.transformResponse({ status: 200, headers: {} })).toMatchObject({ ok: false, status: 400 });
  });

  test('extractor names cannot reach prototypes: __proto__.x lands in the body as data', () => {
    const t = request({ mergeExtractorsToBody: {}, extractors: { '__proto__.polluted': { header: 'x-a', regex: '.*' }, 'constructor.prototype.polluted': { header: 'x-a', regex: '.*' } } });
    const out = ok(t.transformRequest(req({ 'x-a': 'yes' }, '{}')));
    expect(String(out.body)).toBe('{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('extractors into a body that is not an object fail the request (400), as Envoy-Gloo does', () => {
    const t = request({ mergeExtractorsToBody: {}, extractors: { e: { header: 'x-a', regex: '.*' } } });
    expect(t.transformRequest(req({ 'x-a': 'v' }, '[1,2]'))).toMatchObject({ ok: false, status: 400 });
  });

  test('outcomes never share state: the input headers are not modified', () => {
    const headers = { host: 'h.test', 'x-a': 'keep' };
    const out: TransformOutcome<TransformedRequest> = request({ headersToRemove: ['x-a'] }).transformRequest({ method: 'GET', path: '/', headers });
    expect(out.ok && out.message.headers['x-a']).toBe(undefined);
    expect(headers['x-a']).toBe('keep');
  });
});
