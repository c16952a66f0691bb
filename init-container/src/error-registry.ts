// Type only (erased): the registry shape is the SDK's, the lowest package.
import type { ErrorRegistry } from '../../plugin-sdk/src/error-registry.ts';
import { InitCodes } from './errors.ts';

/** @gatehouse/init-container's codes (plugin-sdk/src/error-registry.ts says how the registries are used). */
export const INIT_ERRORS: ErrorRegistry = {
  package: '@gatehouse/init-container',
  sources: ['init-container/src', 'init-container/bin'],
  tables: [{ name: 'InitCodes', file: 'init-container/src/errors.ts', codes: InitCodes, where: 'gatehouse-init\'s error line (stderr) and the container\'s termination message (`gatehouse check`)' }],
  literals: [],
};
