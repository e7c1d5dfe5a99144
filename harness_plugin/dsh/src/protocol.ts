/**
 * The JSONL protocol of `artmem serve` (README, *The harness: tools, the JSONL worker, and kernels*): one JSON object a line each way.
 * Request `{v, id, op, caller, params}`; reply `{v, id, ok: true, result}` or
 * `{v, id, ok: false, error: {code, message, retryable}}`. Replies may come out of order.
 * @module
 */

import { ArtmemError, PluginCode } from './errors.ts'

/** The protocol version this plugin speaks. */
export const PROTOCOL = 1

/** Ops the plugin cannot work without; `events/append` and `recall/first-step` are optional. */
const REQUIRED_OPS = ['hello', 'tools/list', 'tools/call', 'shutdown'] as const

/** Who is calling, always built by the plugin from DSH's execution context, never by the model. */
export interface Caller {
  readonly session_id: string
  readonly cwd: string
  readonly call_id: string
  readonly root_call_id: string
  readonly agent_kind: 'root' | 'child'
}

/** A failure the worker reported. */
export interface WorkerFailure {
  readonly code: string
  readonly message: string
  readonly retryable: boolean
}

/** One line from the worker, classified. */
export type ReplyLine =
  | { readonly kind: 'ok'; readonly id: unknown; readonly result: unknown }
  | { readonly kind: 'error'; readonly id: unknown; readonly error: WorkerFailure }
  /** Not a reply: `id` is present when the line was an object carrying one. */
  | { readonly kind: 'malformed'; readonly id?: unknown }

/** What the worker says about itself in `hello`. */
export interface Hello {
  readonly protocol: number
  readonly name: string
  readonly version: string
  readonly ops: readonly string[]
}

/**
 * Encode one request line.
 * @param id - request id, unique among this plugin's requests.
 * @param op - the operation.
 * @param caller - the host-built caller, or null for ops that act for no caller.
 * @param params - the op's parameters.
 * @returns the line, newline included.
 */
export function encodeRequest(id: number, op: string, caller: Caller | null, params: object): string {
  return `${JSON.stringify({ v: PROTOCOL, id, op, caller, params })}\n`
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Classify one line of the worker's output.
 * @param line - the line, without its newline.
 * @returns a reply, or `malformed` (with the id when one could be read).
 */
export function parseReply(line: string): ReplyLine {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return { kind: 'malformed' }
  }
  if (!isRecord(value)) return { kind: 'malformed' }
  const id = value['id']
  if (value['v'] !== PROTOCOL) return { kind: 'malformed', id }
  if (value['ok'] === true && 'result' in value) return { kind: 'ok', id, result: value['result'] }
  const error = value['error']
  if (value['ok'] === false && isRecord(error)
    && typeof error['code'] === 'string' && typeof error['message'] === 'string') {
    return { kind: 'error', id, error: { code: error['code'], message: error['message'], retryable: error['retryable'] === true } }
  }
  return { kind: 'malformed', id }
}

/**
 * Check the worker's `hello`: the same protocol, artmem, and the ops the plugin needs.
 * @param result - the `hello` result.
 * @returns the checked greeting.
 * @throws ArtmemError `plugin.protocol` naming what does not match.
 */
export function checkHello(result: unknown): Hello {
  if (!isRecord(result)) throw new ArtmemError(PluginCode.PROTOCOL, 'hello: the result is not an object')
  const { protocol, name, version, ops } = result
  if (protocol !== PROTOCOL) {
    throw new ArtmemError(PluginCode.PROTOCOL, `hello: the worker speaks protocol ${String(protocol)}, the plugin ${PROTOCOL}`)
  }
  if (name !== 'artmem' || typeof version !== 'string') {
    throw new ArtmemError(PluginCode.PROTOCOL, 'hello: the worker is not artmem (name and version expected)')
  }
  if (!Array.isArray(ops) || !ops.every(op => typeof op === 'string')) {
    throw new ArtmemError(PluginCode.PROTOCOL, 'hello: ops must be a list of strings')
  }
  const missing = REQUIRED_OPS.filter(op => !ops.includes(op))
  if (missing.length > 0) throw new ArtmemError(PluginCode.PROTOCOL, `hello: the worker lacks ${missing.join(', ')}`)
  return { protocol, name, version, ops }
}
