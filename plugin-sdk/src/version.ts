import rootPackage from '../../package.json' with { type: 'json' };

/**
 * The gateway version this SDK builds for: the root package.json version (SPEC 1).
 * Imported as JSON (not read from disk) so bundled tools such as gatehouse-init keep it.
 */
export const GATEWAY_VERSION: string = rootPackage.version;
