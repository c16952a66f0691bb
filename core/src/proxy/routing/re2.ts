// The RE2 helpers live in ../regex/re2.ts (config checks, rate limiting and transformations use
// them too); re-exported here for the proxy's modules.
export { fullMatcher, programSizeBound, re2Problem, regexSubstitution, substitutionProblem } from '../../regex/re2.ts';
