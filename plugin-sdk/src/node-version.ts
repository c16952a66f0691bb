import { CodedError } from './errors.ts';

/** The oldest Node.js major the SDK, the test kit and the plugin host run on (package.json engines). */
export const MIN_NODE_MAJOR = 24;

/** Node.js is older than {@link MIN_NODE_MAJOR}. */
export const NODE_VERSION_CODE = 'GH_PLUGIN_NODE_VERSION';

/**
 * Fails early, naming the cause, when Node.js is too old. On Node 20 `gatehouse run` crashed
 * with "Cannot read properties of undefined (reading 'bind')" and sandbox tests blamed a
 * missing @gatehouse/core (issue 11): the real cause was the Node version.
 */
export function assertNodeVersion(version: string = process.versions.node): void {
  const major = Number(version.split('.')[0]);
  if (Number.isInteger(major) && major >= MIN_NODE_MAJOR) return;
  throw new CodedError(
    NODE_VERSION_CODE,
    `Gatehouse plugins need Node.js ${MIN_NODE_MAJOR} or newer, but this is Node.js ${version} (${process.execPath}); install Node.js ${MIN_NODE_MAJOR}+ (e.g. "nvm install ${MIN_NODE_MAJOR}") and run again`,
  );
}
