import { NoSchemaIntrospectionCustomRule, specifiedRules, type ValidationRule } from 'graphql';

/**
 * The rules an endpoint validates operations with. Depth (`options.maxDepth`, Gloo) and the other
 * limits are not validation rules: they are measured before validation, in time linear in the
 * document (./limits.ts); a visitor rule expanding fragments took time doubling per level.
 */
export function validationRules(options: { introspection: boolean }): readonly ValidationRule[] {
  const rules: ValidationRule[] = [...specifiedRules];
  // SPEC 3.3: with introspection off, `__schema`/`__type` get an error and no data.
  if (!options.introspection) rules.push(NoSchemaIntrospectionCustomRule);
  return rules;
}
