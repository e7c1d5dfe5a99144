/**
 * The one error type the plugin raises: a DSH `HarnessError` whose `code` is either the worker's
 * own code (`cas.path_escape`, `worker.shutting_down`, ...) or one of the plugin's `plugin.*` codes.
 * DSH keeps `code` as the tool failure's `info.code`; the message repeats it for the model.
 * @module
 */

import { HarnessError } from '@deepseek-ai/dsh-llm'

/** The plugin's own failure codes; worker codes pass through unchanged. */
export const PluginCode = {
  /** The worker exited while this request was in flight (it may or may not have run). */
  WORKER_CRASHED: 'plugin.worker_crashed',
  /** No worker became ready within the request's time (starting, restarting, or broken). */
  WORKER_UNAVAILABLE: 'plugin.worker_unavailable',
  /** The worker did not answer within the request's timeout. */
  TIMEOUT: 'plugin.timeout',
  /** The turn was cancelled; the worker may still finish the call. */
  ABORTED: 'plugin.aborted',
  /** The worker's reply does not follow the protocol. */
  PROTOCOL: 'plugin.protocol',
  /** The plugin is shutting down (dispose or hot reload). */
  DISPOSED: 'plugin.disposed',
  /** The execution context names no agent session or working directory to act for. */
  NO_CALLER: 'plugin.no_caller',
} as const

/** A failed request to the worker, or a call the plugin refused before sending it. */
export class ArtmemError extends HarnessError {
  /** Whether the same request may succeed if tried again (the worker's flag, or the plugin's). */
  readonly retryable: boolean

  /**
   * @param code - stable code: the worker's, or a {@link PluginCode}.
   * @param message - content-free explanation (the worker's messages already are).
   * @param retryable - whether trying again may help.
   */
  constructor(code: string, message: string, retryable = false) {
    super(`[${code}] ${message}`, code)
    this.retryable = retryable
  }
}
