// Entry of the script the host runs in each isolate: leaves `install` where the host picks
// it up (and deletes it). Never imported by host code: it writes a global.
import { RUNTIME_INSTALL_GLOBAL } from './runtime-globals.ts';
import { install } from './sandbox-runtime.ts';

(globalThis as Record<string, unknown>)[RUNTIME_INSTALL_GLOBAL] = install;
