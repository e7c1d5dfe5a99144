/**
 * The conversational side: every DSH session event goes to the worker (`events/append`,
 * fire-and-forget through a bounded window), and a root turn's first step may receive the
 * worker's recall block (`recall/first-step`) as one plugin-sourced message. Both fail open:
 * a failure is counted, never raised into the harness.
 * @module
 */

import { createUserMessage, type UserMessage } from '@deepseek-ai/dsh-llm'
import { classify, sessionCaller, type SessionLike } from './caller.ts'
import { ArtmemError } from './errors.ts'
import type { WorkerClient } from './worker.ts'

/** The message source of injected recall; the worker recognises it and never captures it. */
export const RECALL_SOURCE = { kind: 'plugin', plugin: 'artmem' } as const

type Counts = Record<string, number>

function bump(counts: Counts, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1
}

function codeOf(error: unknown): string {
  return error instanceof ArtmemError ? error.code : 'plugin.internal'
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Forwards session events without ever waiting on the worker. */
export class EventForwarder {
  readonly #worker: Pick<WorkerClient, 'request'>
  readonly #timeoutMs: number
  readonly #maxQueued: number
  readonly #maxBytes: number
  #queued = 0
  /** `accepted`, `captured`, `skipped.<reason>`, `failed.<code>`, `dropped.<why>`. */
  readonly counts: Counts = {}

  constructor(worker: Pick<WorkerClient, 'request'>, options: { timeoutMs: number; maxQueued: number; maxBytes: number }) {
    this.#worker = worker
    this.#timeoutMs = options.timeoutMs
    this.#maxQueued = options.maxQueued
    this.#maxBytes = options.maxBytes
  }

  /**
   * Send one event, verbatim, unless the window is full or the event too large (then count it).
   * @param session - the session whose log grew.
   * @param event - the appended event, as DSH recorded it.
   */
  forward(session: SessionLike, event: { readonly seq: number }): void {
    if (this.#queued >= this.#maxQueued) return bump(this.counts, 'dropped.queue_full')
    if (session.header.cwd === undefined) return bump(this.counts, 'dropped.no_cwd')
    if (Buffer.byteLength(JSON.stringify(event)) > this.#maxBytes) return bump(this.counts, 'dropped.oversized')
    const id = `dsh-event:${event.seq}`
    const caller = sessionCaller(session, id, id)
    this.#queued += 1
    this.#worker.request('events/append', { event }, { caller, timeoutMs: this.#timeoutMs })
      .then((result) => {
        const reply = isRecord(result) ? result : {}
        if (reply['accepted'] === true) bump(this.counts, 'accepted')
        if (typeof reply['captured'] === 'string') bump(this.counts, 'captured')
        if (typeof reply['skipped'] === 'string') bump(this.counts, `skipped.${reply['skipped']}`)
      })
      .catch((error: unknown) => bump(this.counts, `failed.${codeOf(error)}`))
      .finally(() => { this.#queued -= 1 })
  }
}

/** What a pre-step listener sees of the agent. */
export interface RecallAgent {
  readonly id: string
  readonly session: SessionLike
}

/** First-step recall for root turns, within its own timeout and the turn's signal. */
export class Recall {
  readonly #worker: Pick<WorkerClient, 'request'>
  readonly #timeoutMs: number
  /** `injected`, `empty.<reason>`, `failed.<code>`, `skipped.child`, `skipped.not_first_step`. */
  readonly counts: Counts = {}

  constructor(worker: Pick<WorkerClient, 'request'>, timeoutMs: number) {
    this.#worker = worker
    this.#timeoutMs = timeoutMs
  }

  /** Whether a step gets recall: the first step of a root agent's turn. */
  applies(agent: RecallAgent, step: number): boolean {
    if (step !== 1) return false
    if (classify(agent.session.header).kind !== 'root') {
      bump(this.counts, 'skipped.child')
      return false
    }
    return true
  }

  /**
   * Ask the worker for the recall block of this turn.
   * @param agent - the root agent about to step.
   * @param turn - the turn.
   * @param step - the step (1).
   * @param signal - the turn's cancellation.
   * @returns the message to inject, or undefined (nothing to recall, or any failure). Never rejects.
   */
  async fetch(agent: RecallAgent, turn: number, step: number, signal: AbortSignal): Promise<UserMessage | undefined> {
    try {
      const id = `dsh-recall:${turn}.${step}`
      const caller = { ...sessionCaller(agent.session, id, id), session_id: agent.id }
      const result = await this.#worker.request('recall/first-step', { turn, step }, { caller, timeoutMs: this.#timeoutMs, signal })
      const inject = isRecord(result) ? result['inject'] : undefined
      if (!isRecord(inject) || typeof inject['text'] !== 'string' || inject['text'] === '') {
        const reason = isRecord(result) && typeof result['reason'] === 'string' ? result['reason'] : 'none'
        bump(this.counts, `empty.${reason}`)
        return undefined
      }
      bump(this.counts, 'injected')
      return createUserMessage({ content: [{ type: 'text', text: inject['text'] }], source: RECALL_SOURCE })
    } catch (error: unknown) {
      bump(this.counts, `failed.${codeOf(error)}`)
      return undefined
    }
  }
}
