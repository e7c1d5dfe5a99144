/**
 * The caller of every request, built only from what DSH supplies: the agent (its id is the
 * session id), the session header's working directory, the call ids, and root or child.
 * The model's arguments never contribute.
 * @module
 */

import type { SessionHeader } from '@deepseek-ai/dsh-session'
import { ArtmemError, PluginCode } from './errors.ts'
import type { Caller } from './protocol.ts'

/** Root or child, and whether the header said so plainly. */
export interface Classification {
  readonly kind: 'root' | 'child'
  /** False when the header did not say: the session is treated as a child. */
  readonly certain: boolean
}

/** The part of a DSH session the caller is built from. */
export interface SessionLike {
  readonly id: string
  readonly header: Pick<SessionHeader, 'cwd' | 'origin' | 'parentSession' | 'delegationDepth'>
}

/** The part of a DSH tool execution the caller is built from. */
export interface ExecutionLike {
  readonly callId: string
  readonly rootCallId: string
  readonly agent?: { readonly id: string; readonly session: SessionLike } | undefined
}

/**
 * Root or child, from the durable session header. `origin: 'subagent'` or a delegation depth
 * marks a child. A session with a parent but neither mark (a fork) cannot be told apart in DSH
 * rc.7's public contract, so it counts as a child, uncertainly: no automatic recall, and the
 * worker does not capture it.
 * @param header - the session header.
 * @returns the classification.
 */
export function classify(header: SessionLike['header']): Classification {
  if (header.origin === 'subagent' || (header.delegationDepth ?? 0) > 0) return { kind: 'child', certain: true }
  if (header.parentSession !== undefined) return { kind: 'child', certain: false }
  return { kind: 'root', certain: true }
}

/**
 * The caller of a request made for a session.
 * @param session - the session acted for.
 * @param callId - the DSH call id, or a plugin-made id for events and recall.
 * @param rootCallId - the root call id.
 * @returns the caller.
 * @throws ArtmemError `plugin.no_caller` when the session has no working directory.
 */
export function sessionCaller(session: SessionLike, callId: string, rootCallId: string): Caller {
  const cwd = session.header.cwd
  if (cwd === undefined) {
    throw new ArtmemError(PluginCode.NO_CALLER, 'the session has no working directory, so no project')
  }
  return {
    session_id: session.id,
    cwd,
    call_id: callId,
    root_call_id: rootCallId,
    agent_kind: classify(session.header).kind,
  }
}

/**
 * The caller of a tool call: `exec.agent.id`, its session's cwd, `callId`, `rootCallId`.
 * @param exec - DSH's execution context.
 * @returns the caller.
 * @throws ArtmemError `plugin.no_caller` for a call made for no agent or no working directory.
 */
export function toolCaller(exec: ExecutionLike): Caller {
  const agent = exec.agent
  if (agent === undefined) {
    throw new ArtmemError(PluginCode.NO_CALLER, 'artmem tools act for an agent session; this call has none')
  }
  // The agent's id is its session's id in DSH; pass the agent's, as the issue specifies.
  return { ...sessionCaller(agent.session, exec.callId, exec.rootCallId), session_id: agent.id }
}
