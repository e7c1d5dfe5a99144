/** The caller comes from DSH's execution context only; root or child from the session header. */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { classify, sessionCaller, toolCaller } from '../src/caller.ts'
import { ArtmemError, PluginCode } from '../src/errors.ts'

const session = (header: object) => ({ id: 'main-session-1', header: { cwd: '/work/trial', ...header } })

describe('caller', () => {
  it('classifies root, child, and a session it cannot tell (a child, uncertain)', () => {
    assert.deepEqual(classify({}), { kind: 'root', certain: true })
    assert.deepEqual(classify({ origin: 'subagent' }), { kind: 'child', certain: true })
    assert.deepEqual(classify({ delegationDepth: 1 }), { kind: 'child', certain: true })
    assert.deepEqual(classify({ parentSession: 'main-session-0' as never }), { kind: 'child', certain: false })
  })

  it('builds a tool caller from the agent, its session cwd and the call ids', () => {
    const exec = { callId: 'c7', rootCallId: 'c1', agent: { id: 'main-session-1', session: session({}) } }
    assert.deepEqual(toolCaller(exec), {
      session_id: 'main-session-1', cwd: '/work/trial', call_id: 'c7', root_call_id: 'c1', agent_kind: 'root',
    })
    const child = { ...exec, agent: { id: 'child-2', session: { ...session({ origin: 'subagent' }), id: 'child-2' } } }
    assert.equal(toolCaller(child).agent_kind, 'child')
  })

  it('refuses a call with no agent or no working directory', () => {
    const isNoCaller = (e: unknown): boolean => e instanceof ArtmemError && e.code === PluginCode.NO_CALLER
    assert.throws(() => toolCaller({ callId: 'c', rootCallId: 'c' }), isNoCaller)
    assert.throws(() => sessionCaller({ id: 's', header: {} }, 'e', 'e'), isNoCaller)
  })
})
