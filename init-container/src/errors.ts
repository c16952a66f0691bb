import { CodedError } from '@gatehouse/plugin-sdk/errors';

/** Errors of gatehouse-init. `code` is stable (`GH_INIT_*`); the message names the image, entry and what to change. */
export class InitError extends CodedError<InitErrorCode> {
  override name = 'InitError';
}

export const InitCodes = {
  /** The image tag (or layout name) is not the gateway version. */
  TAG_MISMATCH: 'GH_INIT_TAG_MISMATCH',
  /** A layer entry has an absolute path or a `..` segment. */
  UNSAFE_PATH: 'GH_INIT_UNSAFE_PATH',
  /** A link, device, FIFO or other non-regular entry where plugin files belong. */
  UNSAFE_ENTRY: 'GH_INIT_UNSAFE_ENTRY',
  /** A plugin file or layer over its size limit. */
  TOO_LARGE: 'GH_INIT_TOO_LARGE',
  /** The image holds no files under compiled-auth-plugins/. */
  NO_PLUGINS: 'GH_INIT_NO_PLUGINS',
  /** Two images provide the same plugin file with different content. */
  CONFLICT: 'GH_INIT_CONFLICT',
  /** A layer is not a readable tar stream. */
  BAD_LAYER: 'GH_INIT_BAD_LAYER',
  /** The whole run did not finish within --timeout. */
  TIMEOUT: 'GH_INIT_TIMEOUT',
  /** Writing into --dest failed. */
  WRITE_FAILED: 'GH_INIT_WRITE_FAILED',
} as const;

export type InitErrorCode = (typeof InitCodes)[keyof typeof InitCodes];
