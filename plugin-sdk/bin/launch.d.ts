/** Node flags every Gatehouse process runs with. */
export declare const NODE_FLAGS: string[];
/** Environment defaults every Gatehouse process runs with (an operator's own value wins). */
export declare const NODE_ENV_DEFAULTS: Record<string, string>;
/** Runs `<package>/src/<entry>.ts` (or its compiled twin under dist/) from the bin file at `binUrl`. */
export declare function launch(binUrl: string, entry: string): Promise<void>;
/** The file `launch` would run. */
export declare function resolveEntry(binUrl: string, entry: string): string;
/** Oldest Node.js major Gatehouse runs on. */
export declare const MIN_NODE_MAJOR: number;
/** Exits the process with a clear message when Node.js is older than MIN_NODE_MAJOR. */
export declare function assertNodeVersion(version?: string): void;
/** Whether dist/ under `root` was built after the newest runtime source file. */
export declare function isBuildCurrent(root: string): boolean;
