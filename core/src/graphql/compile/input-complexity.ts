import { getNamedType, isInputObjectType, typeFromAST, type GraphQLNamedType, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';

/**
 * Input types whose variables graphql-jit must not compile. graphql-jit generates coercion code
 * for a variable by unrolling its input type; a recursive input type (`input F { and: [F] }`)
 * or a wide diamond of nested inputs unrolls without bound: an 86-byte operation blocked the
 * event loop for 3.6–5.6 s and held ~650 MB (issue 17 finding 10). Found once per schema; such
 * operations run on graphql-js, which coerces variables by walking the value instead.
 */
export function inputsTooComplexToCompile(schema: GraphQLSchema, maxExpandedFields = 256): ReadonlySet<string> {
  const size = new Map<string, number>();
  const visiting = new Set<string>();
  const expanded = (type: GraphQLNamedType): number => {
    if (!isInputObjectType(type)) return 1;
    const known = size.get(type.name);
    if (known !== undefined) return known;
    if (visiting.has(type.name)) return Infinity;
    visiting.add(type.name);
    let total = 1;
    for (const field of Object.values(type.getFields())) {
      total += expanded(getNamedType(field.type));
      if (total > maxExpandedFields) break;
    }
    visiting.delete(type.name);
    size.set(type.name, total);
    return total;
  };
  const out = new Set<string>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (isInputObjectType(type) && expanded(type) > maxExpandedFields) out.add(type.name);
  }
  return out;
}

/** Whether one of the operation's variables has a type from `complex`. */
export function usesComplexInput(schema: GraphQLSchema, operation: OperationDefinitionNode, complex: ReadonlySet<string>): boolean {
  if (complex.size === 0 || !operation.variableDefinitions) return false;
  for (const definition of operation.variableDefinitions) {
    const type = typeFromAST(schema, definition.type as never);
    if (type && complex.has(getNamedType(type).name)) return true;
  }
  return false;
}
