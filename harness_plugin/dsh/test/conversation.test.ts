/** Event forwarding never waits and counts what it drops; recall fails open and counts why. */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { EventForwarder, RECALL_SOURCE, Recall } from '../src/conversation.ts'
import { ArtmemError, PluginCode } from '../src/errors.ts'
import type { RequestOptions } from '../src/worker.ts'

/** A stand-in for the worker: records requests and settles each when the test says. */
class ScriptedWorker {
  readonly sent: { op: string; params: object; options: RequestOptions }[] = []
  readonly settle: ((outcome: { result: unknown } | ArtmemError) => void)[] = []

  request(op: string, params: object, options: RequestOptions): Promise<unknown> {
    this.sent.push({ op, params, options })
    return new Promise((resolve, reject) => {
      this.settle.push(outcome => (outcome instanceof ArtmemError ? reject(outcome) : resolve(outcome.result)))
    })
  }
}

const root = { id: 'main-session-1', header: { cwd: '/work/trial' } }
const turnStart = { type: 'turn/start', seq: 1, time: 0, data: { turn: 1 } }
const settled = (): Promise<void> => new Promise(resolve => setImmediate(resolve))

describe('EventForwarder', () => {
  it('sends each event verbatim with the session caller, without waiting', async () => {
    const worker = new ScriptedWorker()
    const events = new EventForwarder(worker, { timeoutMs: 1000, maxQueued: 10, maxBytes: 10_000 })
    events.forward(root, turnStart)
    assert.deepEqual(worker.sent[0]?.params, { event: turnStart })
    assert.deepEqual(worker.sent[0]?.options.caller, {
      session_id: 'main-session-1', cwd: '/work/trial', call_id: 'dsh-event:1', root_call_id: 'dsh-event:1', agent_kind: 'root',
    })
    worker.settle[0]?.({ result: { accepted: true, captured: 'd1', skipped: null } })
    await settled()
    assert.deepEqual(events.counts, { accepted: 1, captured: 1 })
  })

  it('drops and counts past the window, oversized events, and sessions with no cwd', async () => {
    const worker = new ScriptedWorker()
    const events = new EventForwarder(worker, { timeoutMs: 1000, maxQueued: 1, maxBytes: 200 })
    events.forward({ id: 's', header: {} }, turnStart)
    events.forward(root, turnStart)
    events.forward(root, { ...turnStart, seq: 2 })
    worker.settle[0]?.(new ArtmemError(PluginCode.TIMEOUT, 'slow'))
    await settled()
    const oversized = { ...turnStart, seq: 3, data: { text: 'x'.repeat(300) } }
    events.forward(root, oversized)
    events.forward(root, { ...turnStart, seq: 4 })
    assert.equal(worker.sent.length, 2)
    assert.deepEqual(events.counts, {
      'dropped.queue_full': 1, 'dropped.no_cwd': 1, 'failed.plugin.timeout': 1, 'dropped.oversized': 1,
    })
  })
})

describe('Recall', () => {
  const agent = { id: 'main-session-1', session: root }
  const signal = new AbortController().signal

  it('applies to the first step of a root turn only', () => {
    const recall = new Recall(new ScriptedWorker(), 1500)
    assert.equal(recall.applies(agent, 1), true)
    assert.equal(recall.applies(agent, 2), false)
    assert.equal(recall.applies({ ...agent, session: { ...root, header: { cwd: '/w', origin: 'subagent' as const } } }, 1), false)
    assert.deepEqual(recall.counts, { 'skipped.child': 1 })
  })

  it('turns an inject into one plugin-sourced message, with the recall timeout and the turn signal', async () => {
    const worker = new ScriptedWorker()
    const recall = new Recall(worker, 1500)
    const pending = recall.fetch(agent, 3, 1, signal)
    assert.deepEqual(worker.sent[0]?.params, { turn: 3, step: 1 })
    assert.equal(worker.sent[0]?.options.timeoutMs, 1500)
    assert.equal(worker.sent[0]?.options.signal, signal)
    worker.settle[0]?.({ result: { inject: { text: '[memory] earlier: x', items: 1, chars: 19, estimated_tokens: 5 }, reason: null } })
    const message = await pending
    assert.deepEqual(message?.source, RECALL_SOURCE)
    assert.deepEqual(message?.content, [{ type: 'text', text: '[memory] earlier: x' }])
    assert.equal(message?.role, 'user')
  })

  it('fails open: nothing to recall or any failure gives no message, counted', async () => {
    const worker = new ScriptedWorker()
    const recall = new Recall(worker, 1500)
    const empty = recall.fetch(agent, 1, 1, signal)
    worker.settle[0]?.({ result: { inject: null, reason: 'recall.no_hits' } })
    const failed = recall.fetch(agent, 2, 1, signal)
    worker.settle[1]?.(new ArtmemError(PluginCode.TIMEOUT, 'slow'))
    assert.deepEqual([await empty, await failed], [undefined, undefined])
    assert.deepEqual(recall.counts, { 'empty.recall.no_hits': 1, 'failed.plugin.timeout': 1 })
  })
})
