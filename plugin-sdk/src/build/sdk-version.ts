import sdkPackage from '../../package.json' with { type: 'json' };

/** The `@gatehouse/plugin-sdk` version, recorded in every compiled plugin. */
export const SDK_VERSION: string = sdkPackage.version;
