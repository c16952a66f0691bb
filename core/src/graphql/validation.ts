import {
  GraphQLError,
  Kind,
  NoSchemaIntrospectionCustomRule,
  specifiedRules,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

/**
 * `options.maxDepth` (SPEC 3.3): an operation whose fields nest deeper than `max` is a
 * validation error, so it is rejected before any resolver runs. `{ a { b } }` has depth 2.
 */
export function maxDepthRule(max: number): ValidationRule {
  return function MaxDepth(context: ValidationContext): ASTVisitor {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const d of context.getDocument().definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    return {
      OperationDefinition(node) {
        const depth = depthOf(node.selectionSet, fragments, new Set(), max);
        if (depth > max) {
          const name = node.name ? `"${node.name.value}"` : 'the operation';
          context.reportError(new GraphQLError(`${name} is nested ${depth} levels deep, more than the ${max} this API allows`, { nodes: node }));
        }
        return false;
      },
    };
  };
}

/** Depth of a selection set; stops counting once past `limit` (cost stays bounded on hostile queries). */
function depthOf(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, visiting: Set<string>, limit: number): number {
  let deepest = 0;
  for (const selection of set.selections) {
    let depth = 0;
    if (selection.kind === Kind.FIELD) {
      depth = 1 + (selection.selectionSet && limit > 0 ? depthOf(selection.selectionSet, fragments, visiting, limit - 1) : 0);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      depth = depthOf(selection.selectionSet, fragments, visiting, limit);
    } else {
      const fragment = fragments.get(selection.name.value);
      // Unknown or cyclic fragments are reported by the standard rules.
      if (!fragment || visiting.has(fragment.name.value)) continue;
      visiting.add(fragment.name.value);
      depth = depthOf(fragment.selectionSet, fragments, visiting, limit);
      visiting.delete(fragment.name.value);
    }
    if (depth > deepest) deepest = depth;
    if (deepest > limit) break;
  }
  return deepest;
}

/** The rules an endpoint validates operations with. */
export function validationRules(options: { introspection: boolean; maxDepth?: number | undefined }): readonly ValidationRule[] {
  const rules: ValidationRule[] = [...specifiedRules];
  // SPEC 3.3: with introspection off, `__schema`/`__type` get an error and no data.
  if (!options.introspection) rules.push(NoSchemaIntrospectionCustomRule);
  if (options.maxDepth !== undefined) rules.push(maxDepthRule(options.maxDepth));
  return rules;
}
