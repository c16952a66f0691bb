import Type from 'typebox';
import { Ignored, Strict, atMostOneOf } from '../config/schema/common.ts';

/**
 * Gloo's transformation options (`transformation.options.gloo.solo.io`, the proto
 * `projects/gloo/api/v1/options/transformation/transformation.proto`), with the field names as
 * Gloo's YAML writes them. Exported for the route and virtual-host options; compiled by
 * ./compile.ts. Enums accept the names and the numbers, as protojson does.
 */

/** An Inja template (`InjaTemplate`): `{text}`. */
export const InjaTemplate = Strict({
  text: Type.String({ description: 'an Inja template (docs/transformations.md)' }),
});

/** Gloo's header matcher (`matchers.core.gloo.solo.io.HeaderMatcher`), on request or response headers. */
export const TransformHeaderMatcher = Strict({
  name: Type.String({ minLength: 1 }),
  value: Type.Optional(Type.String()),
  regex: Type.Optional(Type.Boolean({ description: 'treat value as an RE2 regular expression (full match)' })),
  invertMatch: Type.Optional(Type.Boolean()),
});

/** Gloo's request matcher (`matchers.core.gloo.solo.io.Matcher`) as a transformation's `matcher`. */
export const TransformRequestMatcher = Strict(
  {
    prefix: Type.Optional(Type.String()),
    exact: Type.Optional(Type.String()),
    regex: Type.Optional(Type.String({ minLength: 1 })),
    caseSensitive: Type.Optional(Type.Boolean()),
    methods: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    headers: Type.Optional(Type.Array(TransformHeaderMatcher)),
    queryParameters: Type.Optional(
      Type.Array(
        Strict({
          name: Type.String({ minLength: 1 }),
          value: Type.Optional(Type.String()),
          regex: Type.Optional(Type.Boolean()),
        }),
      ),
    ),
  },
  atMostOneOf(['prefix', 'exact', 'regex']),
);

/** `Extraction.Mode`. */
export const ExtractionMode = Type.Union([Type.Literal('EXTRACT'), Type.Literal('SINGLE_REPLACE'), Type.Literal('REPLACE_ALL'), Type.Literal(0), Type.Literal(1), Type.Literal(2)]);

/** An extractor: a header or the body, an RE2 regex, a subgroup, a mode. */
export const Extraction = Strict(
  {
    header: Type.Optional(Type.String({ minLength: 1, description: 'header to read (pseudo-headers `:path`, `:method`, `:authority`, `:scheme`, `:status` too)' })),
    body: Type.Optional(Strict({})),
    regex: Type.String({ description: 'RE2 regex; EXTRACT and SINGLE_REPLACE match the whole source' }),
    subgroup: Type.Optional(Type.Integer({ minimum: 0, maximum: 4294967295 })),
    replacementText: Type.Optional(Type.String()),
    mode: Type.Optional(ExtractionMode),
  },
  // Gloo's `oneof source`: one of them (checked by the compiler, which names the field).
  atMostOneOf(['header', 'body']),
);

/** `MergeJsonKeys.OverridableTemplate`. */
const OverridableTemplate = Strict({
  tmpl: Type.Optional(InjaTemplate),
  overrideEmpty: Type.Optional(Type.Boolean()),
});

/** `TransformationTemplate.RequestBodyParse`. */
export const ParseBodyBehavior = Type.Union([Type.Literal('ParseAsJson'), Type.Literal('DontParse'), Type.Literal(0), Type.Literal(1)]);

/** `TransformationTemplate`: headers, body, extractors and metadata rendered from Inja templates. */
export const TransformationTemplate = Strict(
  {
    advancedTemplates: Type.Optional(Type.Boolean({ description: 'JSON-pointer notation (`a/b`) instead of dots; extractors only through extraction()' })),
    extractors: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Extraction)),
    headers: Type.Optional(Type.Record(Type.String({ minLength: 1 }), InjaTemplate)),
    headersToAppend: Type.Optional(Type.Array(Strict({ key: Type.String({ minLength: 1 }), value: InjaTemplate }))),
    headersToRemove: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    body: Type.Optional(InjaTemplate),
    passthrough: Type.Optional(Strict({})),
    mergeExtractorsToBody: Type.Optional(Strict({})),
    mergeJsonKeys: Type.Optional(Strict({ jsonKeys: Type.Optional(Type.Record(Type.String({ minLength: 1 }), OverridableTemplate)) })),
    parseBodyBehavior: Type.Optional(ParseBodyBehavior),
    ignoreErrorOnParse: Type.Optional(Type.Boolean()),
    dynamicMetadataValues: Type.Optional(
      Type.Array(
        Strict({
          metadataNamespace: Type.Optional(Type.String()),
          key: Type.String({ minLength: 1 }),
          value: InjaTemplate,
          jsonToProto: Type.Optional(Type.Boolean()),
        }),
      ),
    ),
    escapeCharacters: Type.Optional(Type.Boolean({ description: 'print strings JSON-escaped (without quotes)' })),
    // Checked and compiled (./compile.ts), but the rendered name does not reach a tracing span yet.
    spanTransformer: Type.Optional(Ignored(Strict({ name: Type.Optional(InjaTemplate) }), 'the rendered span name is not applied to tracing spans yet')),
  },
  // Gloo's `oneof body_transformation`.
  atMostOneOf(['body', 'passthrough', 'mergeExtractorsToBody', 'mergeJsonKeys']),
);

/** `HeaderBodyTransform`: the headers (and with `addRequestMetadata`, the request line) into a JSON body. */
export const HeaderBodyTransform = Strict({
  addRequestMetadata: Type.Optional(Type.Boolean()),
});

/** `Transformation`: a template or a header-body transform. */
export const Transformation = Strict(
  {
    transformationTemplate: Type.Optional(TransformationTemplate),
    headerBodyTransform: Type.Optional(HeaderBodyTransform),
    logRequestResponseInfo: Type.Optional(Type.Boolean()),
  },
  atMostOneOf(['transformationTemplate', 'headerBodyTransform']),
);

/** `RequestMatch`: the first whose matcher matches the request runs (one per stage). */
export const RequestMatch = Strict({
  matcher: Type.Optional(TransformRequestMatcher),
  clearRouteCache: Type.Optional(Type.Boolean()),
  requestTransformation: Type.Optional(Transformation),
  responseTransformation: Type.Optional(Transformation),
});

/** `ResponseMatch`: consulted only when the matched request entry has no response transformation. */
export const ResponseMatch = Strict({
  matchers: Type.Optional(Type.Array(TransformHeaderMatcher)),
  responseCodeDetails: Type.Optional(Type.String()),
  responseTransformation: Type.Optional(Transformation),
});

/** `RequestResponseTransformations`: one stage. */
export const RequestResponseTransformations = Strict({
  requestTransforms: Type.Optional(Type.Array(RequestMatch)),
  responseTransforms: Type.Optional(Type.Array(ResponseMatch)),
});

/** `TransformationStages`: `stagedTransformations` on a virtual host, route or weighted destination. */
export const TransformationStages = Strict(
  {
    early: Type.Optional(RequestResponseTransformations),
    regular: Type.Optional(RequestResponseTransformations),
    postRouting: Type.Optional(RequestResponseTransformations),
    inheritTransformation: Type.Optional(Type.Boolean()),
    logRequestResponseInfo: Type.Optional(Type.Boolean()),
    escapeCharacters: Type.Optional(Type.Boolean()),
  },
  // Validated at load; opaque in the CRD (core/src/install/structural-schema.ts), where it would weigh hundreds of KB.
  { 'x-gatehouse-crd-opaque': true },
);

/** `Transformations`: the older `transformations` option (one request and one response transformation). */
export const Transformations = Strict(
  {
    requestTransformation: Type.Optional(Transformation),
    clearRouteCache: Type.Optional(Type.Boolean()),
    responseTransformation: Type.Optional(Transformation),
  },
  { 'x-gatehouse-crd-opaque': true },
);

export type InjaTemplateSpec = Type.Static<typeof InjaTemplate>;
export type ExtractionSpec = Type.Static<typeof Extraction>;
export type TransformationTemplateSpec = Type.Static<typeof TransformationTemplate>;
export type TransformationSpec = Type.Static<typeof Transformation>;
export type RequestMatchSpec = Type.Static<typeof RequestMatch>;
export type ResponseMatchSpec = Type.Static<typeof ResponseMatch>;
export type RequestResponseTransformationsSpec = Type.Static<typeof RequestResponseTransformations>;
export type TransformationStagesSpec = Type.Static<typeof TransformationStages>;
export type TransformationsSpec = Type.Static<typeof Transformations>;
export type TransformHeaderMatcherSpec = Type.Static<typeof TransformHeaderMatcher>;
