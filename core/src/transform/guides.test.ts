import Type from 'typebox';
import Schema from 'typebox/schema';
import { describe, expect, test } from 'vitest';
import YAML from 'yaml';
import { Strict } from '../config/schema/common.ts';
import { applyRequestStages, applyResponseStages, requestNeedsBody, responseNeedsBody } from './apply.ts';
import { compileStages, inheritStages, TransformConfigError, type CompiledStages, type TransformRequest, type TransformResponse } from './compile.ts';
import { TransformationStages, Transformations } from './schema.ts';

/**
 * Every example of Gloo's transformation guides (docs/content/guides/traffic_management/
 * request_processing/transformations/, and the guides elsewhere that use transformations), with
 * the output the guide shows. Option blocks are the guides' YAML, verbatim unless a test says why.
 */

const Options = Strict({ transformations: Type.Optional(Transformations), stagedTransformations: Type.Optional(TransformationStages) });
const checkOptions = Schema.Compile(Options);

/** Parses an `options:` block as the guide writes it, checks it against the schema, compiles it. */
function load(yaml: string, env: Record<string, string> = {}): CompiledStages {
  const options = YAML.parse(yaml) as Type.Static<typeof Options>;
  expect(checkOptions.Check(options), JSON.stringify(checkOptions.Errors(options))).toBe(true);
  return compileStages(options, 'options', { env });
}

function req(path: string, headers: Record<string, string> = {}, body?: string, method = 'GET'): TransformRequest {
  return { method, path, scheme: 'http', headers: { host: 'localhost', ...headers }, body };
}

/** The request as the upstream would receive it. */
function sendRequest(stages: CompiledStages, request: TransformRequest) {
  const out = applyRequestStages(stages, request);
  if (!out.ok) throw new Error(`request transformation failed: ${out.code} ${out.message}`);
  return out;
}

/** The exchange end to end: request transformations, then the response ones. */
function exchange(stages: CompiledStages, request: TransformRequest, response: (sent: TransformRequest) => TransformResponse) {
  const sent = sendRequest(stages, request);
  const out = applyResponseStages(stages, sent.selections, response(sent.request), sent.request);
  if (!out.ok) throw new Error(`response transformation failed: ${out.code} ${out.message}`);
  return out;
}

/** Postman Echo's answer to a request: what the guides' upstream returns. */
function postmanEcho(sent: TransformRequest): TransformResponse {
  const bodyText = sent.body === undefined ? '' : String(sent.body);
  let json: unknown = null;
  try {
    json = bodyText ? JSON.parse(bodyText) : null;
  } catch {}
  const q = sent.path.indexOf('?');
  const args = Object.fromEntries(new URLSearchParams(q === -1 ? '' : sent.path.slice(q + 1)));
  const echo = { args, ...(sent.method === 'POST' ? { data: json ?? {}, json } : {}), headers: sent.headers, url: `https://postman-echo.com${sent.path}` };
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(echo) };
}

describe('guide: Transformations (transformations/_index.md)', () => {
  test('_index.md "Defining a transformation": a virtual-host stagedTransformations sets foo: bar', () => {
    const stages = load(`
    stagedTransformations:
      regular:
        requestTransforms:
        - requestTransformation:
            transformationTemplate:
              headers:
                foo:
                  text: 'bar'
`);
    expect(sendRequest(stages, req('/anything')).request.headers.foo).toBe('bar');
  });

  test('_index.md "Inheritance rules": the child route\'s transformation comes first, the virtual host\'s is appended with inheritTransformation', () => {
    // The guide writes `matchers:` (a list) in the child's requestTransforms entry; Gloo's proto
    // (RequestMatch) has `matcher`, so protojson rejects the guide's spelling, and so does the schema.
    const guideChild = YAML.parse(`
stagedTransformations:
  inheritTransformation: true
  regular:
    requestTransforms:
    - matchers:
      - prefix: '/child'
      requestTransformation:
        transformationTemplate:
          headers:
            foo:
              text: 'baz'
`);
    expect(checkOptions.Check(guideChild)).toBe(false);

    const parent = load(`
stagedTransformations:
  regular:
    requestTransforms:
    - matcher:
        prefix: '/parent'
      requestTransformation:
        transformationTemplate:
          headers:
            foo:
              text: 'bar'
`);
    const childYaml = (inherit: boolean) => `
stagedTransformations:
  inheritTransformation: ${inherit}
  regular:
    requestTransforms:
    - matcher:
        prefix: '/child'
      requestTransformation:
        transformationTemplate:
          headers:
            foo:
              text: 'baz'
`;
    const inherited = inheritStages(load(childYaml(true)), parent)!;
    expect(sendRequest(inherited, req('/child')).request.headers.foo).toBe('baz');
    expect(sendRequest(inherited, req('/parent')).request.headers.foo).toBe('bar');
    // "if you set inheritTransformation to false (default), the parent's transformations are not inherited".
    const alone = inheritStages(load(childYaml(false)), parent)!;
    expect(sendRequest(alone, req('/parent')).request.headers.foo).toBeUndefined();
    // "When a child attribute has no stagedTransformations block of its own, it automatically inherits".
    expect(sendRequest(inheritStages(undefined, parent)!, req('/parent')).request.headers.foo).toBe('bar');
  });

  test('_index.md "Inheritance rules for delegated RouteTables": one transformation per stage, the RouteTable\'s wins; other stages both apply', () => {
    const delegatingRoute = load(`
stagedTransformations:
  regular:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          headers:
            x-route-transform:
              text: 'set-by-delegating-route'
`);
    const routeTable = load(`
stagedTransformations:
  inheritTransformation: true
  regular:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          headers:
            x-child-transform:
              text: 'set-by-routetable'
`);
    // Same stage, both match every request: "Delegated RouteTable's transformation always wins".
    const same = sendRequest(inheritStages(routeTable, delegatingRoute)!, req('/api/v1')).request.headers;
    expect(same['x-child-transform']).toBe('set-by-routetable');
    expect(same['x-route-transform']).toBeUndefined();
    // Different stages with inheritTransformation: "Both apply".
    const earlyChild = load(`
stagedTransformations:
  inheritTransformation: true
  early:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          headers:
            x-child-transform:
              text: 'set-by-routetable'
`);
    const both = sendRequest(inheritStages(earlyChild, delegatingRoute)!, req('/api/v1')).request.headers;
    expect(both['x-child-transform']).toBe('set-by-routetable');
    expect(both['x-route-transform']).toBe('set-by-delegating-route');
  });

  test('_index.md "extractors": the foo query parameter from :path, subgroup 2', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      extractors:
        # This is the name of the extraction
        foo:
          # The :path pseudo-header contains the URI
          header: ':path'
          # Use a nested capturing group to extract the query param
          regex: '(.*foo=([^&]*).*)'
          # Select the second group match
          subgroup: 2
      headers:
        x-foo:
          text: '{{ foo }}'
`);
    expect(sendRequest(stages, req('/get?a=1&foo=value-of-foo&b=2')).request.headers['x-foo']).toBe('value-of-foo');
  });

  test('_index.md "extractors": bodyIdExtractor extracts 4423 from a plain-text body', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      extractors:
        # This is the name of the extraction
        bodyIdExtractor:
          # This empty struct must be included to extract from the body
          body: {}
          # The regex must match the ENTIRE body, else the extraction will not work
          # The [\\s\\S]* allows us to match any character, making the regex match the entire source.
          regex: '[\\s\\S]*id: ([0-9]{4})[\\s\\S]*'
          # Select the first subgroup match ([0-9]{4}) since we only want the id number
          subgroup: 1
      headers:
        x-id:
          text: '{{ bodyIdExtractor }}'
`);
    const body = 'Here is a body containing the identification number of the object.\n\nid: 4423\n';
    expect(sendRequest(stages, req('/', {}, body, 'POST')).request.headers['x-id']).toBe('4423');
  });

  test('_index.md "Extractor Example - Single Replace Mode": banana becomes orange', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      extractors:
        BananaToOrange:
          body: {}
          mode: SINGLE_REPLACE
          replacementText: 'orange'
          regex: '.*(banana).*'
          subgroup: 1
      body: 
        text: '{{ BananaToOrange }}'
`);
    const out = sendRequest(stages, req('/', {}, 'Fruits: [apple, pear, banana, pineapple]', 'POST'));
    expect(String(out.request.body)).toBe('Fruits: [apple, pear, orange, pineapple]');
    expect(out.request.headers['content-length']).toBe(String('Fruits: [apple, pear, orange, pineapple]'.length));
  });

  test('_index.md "Extractor Example - Replace All Mode": foo foo foo becomes bar bar bar', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      extractors:
        FooToBar:
          body: {}
          regex: 'foo'
          mode: REPLACE_ALL
          replacementText: 'bar'
      body: 
        text: '{{ FooToBar }}'
`);
    expect(String(sendRequest(stages, req('/', {}, 'foo foo foo', 'POST')).request.body)).toBe('bar bar bar');
  });

  test('_index.md "Extractor Modes": the configuration validation the table lists', () => {
    const problem = (extractor: object) => {
      try {
        compileStages({ transformations: { requestTransformation: { transformationTemplate: { extractors: { e: extractor as never } } } } }, 'options', { env: {} });
        return undefined;
      } catch (error) {
        return (error as TransformConfigError).path;
      }
    };
    expect(problem({ header: 'x', regex: '(.*)', replacementText: 'y' })).toBe('options.transformations.requestTransformation.transformationTemplate.extractors.e.replacementText');
    expect(problem({ header: 'x', regex: '(.*)', mode: 'SINGLE_REPLACE', subgroup: 1 })).toBe('options.transformations.requestTransformation.transformationTemplate.extractors.e.replacementText');
    expect(problem({ header: 'x', regex: '(.*)', mode: 'REPLACE_ALL', replacementText: 'y', subgroup: 1 })).toBe('options.transformations.requestTransformation.transformationTemplate.extractors.e.subgroup');
    expect(problem({ header: 'x', regex: '(.*)', mode: 'REPLACE_ALL', replacementText: 'y' })).toBeUndefined();
  });

  test('_index.md "headers": foo gets the value of the bar header; color comes from the JSON body', () => {
    const fromHeader = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      headers:
        foo:
          text: '{{ header("bar") }}'
`);
    expect(sendRequest(fromHeader, req('/', { bar: 'from-bar' })).request.headers.foo).toBe('from-bar');
    const fromBody = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      headers:
        color:
          text: '{{ Favorites.Color }}'
`);
    const body = JSON.stringify({ Name: 'Gloo', Favorites: { Color: 'Blue' } });
    expect(sendRequest(fromBody, req('/', {}, body, 'POST')).request.headers.color).toBe('Blue');
  });

  test('_index.md "body": a 404 response body becomes { "error": "Not found!" }, other bodies are kept', () => {
    const stages = load(`
transformations:
  responseTransformation:
    transformationTemplate:
      body:
        text: '{% if header(":status") == "404" %}{ "error": "Not found!" }{% else %}{{ body() }}{% endif %}'
`);
    const notFound = exchange(stages, req('/missing'), () => ({ status: 404, headers: {}, body: '{"detail":"nope"}' }));
    expect(String(notFound.response.body)).toBe('{ "error": "Not found!" }');
    const ok = exchange(stages, req('/ok'), () => ({ status: 200, headers: {}, body: '{"kept":true}' }));
    expect(String(ok.response.body)).toBe('{"kept":true}');
  });

  test('_index.md "passthrough": the body is not buffered', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      passthrough: {}
      headers:
        x-seen:
          text: 'yes'
`);
    expect(requestNeedsBody(stages, req('/'))).toBe(false);
    const out = sendRequest(stages, req('/', {}, 'not json at all', 'POST'));
    expect(out.request.headers['x-seen']).toBe('yes');
    expect(out.bodyChanged).toBe(false);
  });

  test('_index.md "mergeExtractorsToBody": path and host.name are merged into the body', () => {
    // The guide's snippet indents `path:` and `host.name:` beside `extractors:` (invalid YAML for
    // the schema: they would be template fields); this is the same configuration, indented under it.
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      mergeExtractorsToBody: {}
      extractors:
        path:
          header: ':path'
          regex: '.*'
        # The name of this attribute determines where the value will be nested in the body
        host.name:
          header: 'host'
          regex: '.*'
`);
    const out = sendRequest(stages, req('/the/request/path', { host: "value of the 'host' header" }, '{"original":1}', 'POST'));
    expect(JSON.parse(String(out.request.body))).toEqual({ original: 1, path: '/the/request/path', host: { name: "value of the 'host' header" } });
  });

  test('_index.md "dynamicMetadataValues": com.example foo is the foo header', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      dynamicMetadataValues:
      - metadataNamespace: "com.example"
        key: 'foo'
        value:
          text: '{{ header("foo") }}'
`);
    expect(sendRequest(stages, req('/', { foo: 'metadata-value' })).dynamicMetadata).toEqual({ 'com.example': { foo: 'metadata-value' } });
  });

  test('_index.md "advancedTemplates": JSON pointer notation and extraction("myExtractor")', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      advancedTemplates: true
      extractors:
        myExtractor:
          header: 'foo'
          regex: '.*'
      headers:
        x-start:
          text: '{{ time/start }}'
        x-extracted:
          text: '{{ extraction("myExtractor") }}'
`);
    const out = sendRequest(stages, req('/', { foo: 'extracted' }, JSON.stringify({ time: { start: 'noon' } }), 'POST'));
    expect(out.request.headers['x-start']).toBe('noon');
    expect(out.request.headers['x-extracted']).toBe('extracted');
  });

  test('_index.md "escapeCharacters": body strings keep their escapes when building JSON', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      escapeCharacters: true
      body:
        text: '{"message": "{{ message }}"}'
`);
    const out = sendRequest(stages, req('/', {}, JSON.stringify({ message: 'say "hi"\nthen leave' }), 'POST'));
    expect(JSON.parse(String(out.request.body))).toEqual({ message: 'say "hi"\nthen leave' });
  });
});

describe('schema: names as Gloo writes them, nothing unknown accepted', () => {
  test('enums accept names and protojson numbers; unknown fields (xsltTransformation, removed in Gloo 1.22) are rejected', () => {
    const numbers = { transformations: { requestTransformation: { transformationTemplate: { parseBodyBehavior: 1, extractors: { e: { body: {}, regex: 'a', mode: 2, replacementText: 'b' } }, body: { text: '{{ e }}' } } } } };
    expect(checkOptions.Check(numbers)).toBe(true);
    const out = sendRequest(compileStages(numbers as never, 'o'), req('/', {}, 'banana', 'POST'));
    expect(String(out.request.body)).toBe('bbnbnb');
    expect(checkOptions.Check({ transformations: { requestTransformation: { xsltTransformation: { xslt: '<x/>' } } } })).toBe(false);
    expect(checkOptions.Check({ stagedTransformations: { regular: { requestTransforms: [{ requestTransformation: { transformationTemplate: { body: { text: 'a' }, passthrough: {} } } }] } } })).toBe(false);
    expect(checkOptions.Check({ transformations: { requestTransformation: { transformationTemplate: { extractors: { e: { header: 'a', body: {}, regex: '.*' } } } } } })).toBe(false);
  });
});

describe('guide: Add headers to the body (add_headers_to_body/_index.md)', () => {
  test('root and nested headers are merged into the JSON body at root and payload.nested', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      # Merge the specified extractors to the request body
      mergeExtractorsToBody: {}
      extractors:
        # The name of this attribute determines where the value will be nested in the body (using dots)
        root:
          # Name of the header to extract
          header: 'root'
          # Regex to apply to it, this is needed
          regex: '.*'
        # The name of this attribute determines where the value will be nested in the body (using dots)
        payload.nested:
          # Name of the header to extract
          header: 'nested'
          # Regex to apply to it, this is needed
          regex: '.*'
`);
    const data = '{\n  "payload": {\n    "foo": "bar"\n  }\n}\n';
    const out = exchange(stages, req('/post', { 'content-type': 'application/json', root: 'root-val', nested: 'nested-val' }, data, 'POST'), postmanEcho);
    const echoed = JSON.parse(String(out.response.body));
    expect(echoed.data).toEqual({ payload: { foo: 'bar', nested: 'nested-val' }, root: 'root-val' });
    expect(echoed.json).toEqual({ payload: { foo: 'bar', nested: 'nested-val' }, root: 'root-val' });
    // The guide's echo shows "content-length": "65": the merged body, compact JSON.
    expect(echoed.headers['content-length']).toBe('65');
  });
});

describe('guide: Change response status (change_response_status/_index.md)', () => {
  const stages = () =>
    load(`
transformations:
  responseTransformation:
    transformationTemplate:
      headers:
        # We set the response status via the :status pseudo-header based on the response code
        ":status":
          text: '{% if default(data.error.message, "") != "" %}400{% else %}{{ header(":status") }}{% endif %}'
`);

  test('data.error.message present: 400', () => {
    const out = exchange(stages(), req('/post', { 'content-type': 'application/json' }, '{\n  "error": {\n    "message": "This is an error"\n  }\n}\n', 'POST'), postmanEcho);
    expect(out.response.status).toBe(400);
  });

  test('error is an empty object: the upstream 200 is kept', () => {
    const out = exchange(stages(), req('/post', { 'content-type': 'application/json' }, '{\n  "error": {}\n}\n', 'POST'), postmanEcho);
    expect(out.response.status).toBe(200);
  });
});

describe('guide: Decode and modify base64 request headers (decode_and_modify_base64_headers/_index.md)', () => {
  test('x-decoded-test is testsuffix', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      headers:
        x-decoded-test:
          text: '{{substring(base64_decode(request_header("x-test")), 11)}}'
`);
    const out = exchange(stages, req('/get', { 'x-test': 'dGVzdHByZWZpeC50ZXN0c3VmZml4' }), postmanEcho);
    const echoed = JSON.parse(String(out.response.body));
    expect(echoed.headers['x-test']).toBe('dGVzdHByZWZpeC50ZXN0c3VmZml4');
    expect(echoed.headers['x-decoded-test']).toBe('testsuffix');
  });
});

describe('guide: Enriching access logs (enrich_access_logs/_index.md)', () => {
  test('pod_name from env POD_NAME and endpoint_url from the response body become dynamic metadata', () => {
    const stages = load(
      `
transformations:
  # Apply a transformation to the response
  responseTransformation:
    transformationTemplate:
      dynamicMetadataValues:
      # Set a dynamic metadata entry named "pod_name"
      - key: 'pod_name'
        value:
          # The POD_NAME env is set by default on the gateway-proxy pods
          text: '{{ env("POD_NAME") }}'
      # Set a dynamic metadata entry using an request body attribute
      - key: 'endpoint_url'
        value:
          # The "url" attribute in the JSON response body
          text: '{{ url }}'
`,
      { POD_NAME: 'gateway-proxy-f46b58f89-5fkmd' },
    );
    const out = exchange(stages, req('/get'), postmanEcho);
    // The guide's log shows "\"https://postman-echo.com/get\"": Envoy's %DYNAMIC_METADATA()% prints a string value as JSON.
    expect(out.dynamicMetadata).toEqual({ 'io.solo.transformation': { pod_name: 'gateway-proxy-f46b58f89-5fkmd', endpoint_url: 'https://postman-echo.com/get' } });
    expect(responseNeedsBody(stages)).toBe(true);
  });
});

describe('guide: Extract query parameters (extract_query_params/_index.md)', () => {
  test('foo and bar headers carry the query parameters', () => {
    const stages = load(`
transformations:
  requestTransformation:
    transformationTemplate:
      extractors:
        # This extracts the 'foo' query param to an extractor named 'foo'
        foo:
          # The :path pseudo-header contains the URI
          header: ':path'
          # Use a nested capturing group to extract the query param
          regex: '(.*foo=([^&]*).*)'
          subgroup: 2
        # This extracts the 'bar' query param to an extractor named 'bar'
        bar:
          # The :path pseudo-header contains the URI
          header: ':path'
          # Use a nested capturing group to extract the query param
          regex: '(.*bar=([^&]*).*)'
          subgroup: 2
      # Add two new headers with the values of the 'foo' and 'bar' extractions
      headers:
        foo:
          text: '{{ foo }}'
        bar:
          text: '{{ bar }}'
`);
    expect(requestNeedsBody(stages, req('/get'))).toBe(false);
    const out = exchange(stages, req('/get?foo=foo-value&bar=bar-value'), postmanEcho);
    const echoed = JSON.parse(String(out.response.body));
    expect(echoed.args).toEqual({ foo: 'foo-value', bar: 'bar-value' });
    expect(echoed.headers.foo).toBe('foo-value');
    expect(echoed.headers.bar).toBe('bar-value');
    expect(echoed.url).toBe('https://postman-echo.com/get?foo=foo-value&bar=bar-value');
  });
});

describe('guide: Inject response header (inject_response_header/_index.md)', () => {
  test('x-solo-resp-hdr1: val1 on the response', () => {
    const stages = load(`
transformations:
  responseTransformation:
    transformationTemplate:
      headers:
        x-solo-resp-hdr1:
          text: '{{ request_header("x-solo-hdr1") }}'
`);
    expect(responseNeedsBody(stages)).toBe(false);
    const out = exchange(stages, req('/get', { 'x-solo-hdr1': 'val1' }), postmanEcho);
    expect(out.response.headers['x-solo-resp-hdr1']).toBe('val1');
  });
});

describe('guide: Update request path (update_request_uri/_index.md)', () => {
  const stages = () =>
    load(`
transformations:
  requestTransformation:
    transformationTemplate:
      headers:
        # By updating the :path pseudo-header, we update the request URI
        ":path":
          text: '{% if header("foo") == "bar" %}/post{% else %}{{ header(":path") }}{% endif %}'
        # By updating the :method pseudo-header, we update the request HTTP method
        ":method":
          text: '{% if header("foo") == "bar" %}POST{% else %}{{ header(":method") }}{% endif %}'
`);

  test('foo: bar sends POST /post', () => {
    const out = exchange(stages(), req('/get', { foo: 'bar' }), postmanEcho);
    expect(JSON.parse(String(out.response.body)).url).toBe('https://postman-echo.com/post');
    expect(sendRequest(stages(), req('/get', { foo: 'bar' })).request.method).toBe('POST');
  });

  test('without the header the request is GET /get', () => {
    const sent = sendRequest(stages(), req('/get')).request;
    expect([sent.method, sent.path]).toEqual(['GET', '/get']);
  });
});

describe('guide: Debug logging for transformations (debug_logging/_index.md)', () => {
  test('early then regular request headers are both added; logRequestResponseInfo is accepted', () => {
    const stages = load(`
stagedTransformations:
  early:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          headers:
            x-early-request-header: 
              text: "early"
  regular:
    requestTransforms:
    - requestTransformation:
        logRequestResponseInfo: true
        transformationTemplate:
          headers:
            x-regular-request-header: 
              text: "regular"
`);
    const echoed = JSON.parse(String(exchange(stages, req('/get'), postmanEcho).response.body));
    expect(echoed.headers['x-early-request-header']).toBe('early');
    expect(echoed.headers['x-regular-request-header']).toBe('regular');
  });
});

describe('guides elsewhere that use transformations', () => {
  test('observability/tracing/otel.md: spanTransformer names the span after the Host header', () => {
    const stages = load(`
stagedTransformations:
  regular:
    requestTransforms:
      - requestTransformation:
          transformationTemplate:
            spanTransformer:
              name:
                text: '{{header("Host")}}'
`);
    expect(sendRequest(stages, req('/', { host: 'my-hostname' })).spanName).toBe('my-hostname');
  });

  test('security/auth/extauth/oauth/auth0: the id_token cookie becomes the jwt header', () => {
    const stages = load(`
stagedTransformations:
  early:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          extractors:
            token:
              header: 'cookie'
              regex: '.*id_token=([^;]*).*'
              subgroup: 1
          headers:
            jwt:
              text: '{{ token }}'
`);
    expect(sendRequest(stages, req('/', { cookie: 'a=b; id_token=eyJ.abc.def; c=d' })).request.headers.jwt).toBe('eyJ.abc.def');
  });

  test('security/auth/extauth/oauth/access_token: x-customer from ext_authz dynamic metadata', () => {
    const stages = load(`
stagedTransformations:
  regular:
    requestTransforms:
    - requestTransformation:
        transformationTemplate:
          headers:
            x-customer:
              text: '{{ dynamic_metadata("config_0:sub", "envoy.filters.http.ext_authz")}}'
`);
    const request = { ...req('/headers'), dynamicMetadata: { 'envoy.filters.http.ext_authz': { config_0: { sub: 'my-client' } } } };
    expect(sendRequest(stages, request).request.headers['x-customer']).toBe('my-client');
  });

  test('configuration_validation/admission_control.md: the malformed template is rejected at load with its field path', () => {
    const options = YAML.parse(`
stagedTransformations: 
  regular: 
    responseTransforms: 
    - responseTransformation: 
        transformationTemplate: 
          headers: 
            test_header: 
              text: '{% if default(data.error.message, "") != %}400{% else '
`);
    expect(checkOptions.Check(options)).toBe(true);
    expect(() => compileStages(options, 'spec.virtualHost.routes[0].options', { env: {} })).toThrow(TransformConfigError);
    try {
      compileStages(options, 'spec.virtualHost.routes[0].options', { env: {} });
    } catch (error) {
      expect((error as TransformConfigError).path).toBe('spec.virtualHost.routes[0].options.stagedTransformations.regular.responseTransforms[0].responseTransformation.transformationTemplate.headers.test_header.text');
      expect((error as TransformConfigError).code).toBe('GH_TRANSFORM_TEMPLATE');
    }
  });
});
