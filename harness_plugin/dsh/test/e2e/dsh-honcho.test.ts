/**
 * Recall across two DSH sessions against the real Honcho (`../shared/tools/honcho-env.sh`), on
 * each instance whose URL is set: HONCHO_BASE_URL (no embeddings) and HONCHO_EMBED_BASE_URL
 * (embeddings). Session 1: the person states a fact and the model records it (`memory_record`).
 * Session 2, a new DSH session: the person asks about it as a question; step 1 must inject a
 * recall block that names the note. Each run owns a fresh workspace and deletes it afterwards
 * (sessions first: the server refuses a workspace that still has one).
 */

import assert from 'node:assert/strict'
import { rmSync, writeFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { KEY_ENV, artmemToml, layout, runSession, toolResults, userMessages, type Session } from './harness.ts'

const SAID = 'Our lab reports every assay result in millimolar units.'
const ASKED = 'Which units does our lab report assay results in?'

/** Delete a workspace as the server allows: each session (202, queued), then the workspace. */
async function deleteWorkspace(baseUrl: string, workspace: string): Promise<void> {
  const listed = await fetch(`${baseUrl}/v3/workspaces/${workspace}/sessions/list?size=100`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}',
  })
  const items = listed.ok ? ((await listed.json()) as { items: { id: string }[] }).items : []
  for (const { id } of items) {
    const gone = await fetch(`${baseUrl}/v3/workspaces/${workspace}/sessions/${id}`, { method: 'DELETE' })
    assert.ok([202, 404].includes(gone.status), `session ${id}: ${gone.status}`)
  }
  const gone = await fetch(`${baseUrl}/v3/workspaces/${workspace}`, { method: 'DELETE' })
  assert.ok([202, 404].includes(gone.status), `workspace ${workspace}: ${gone.status}`)
}

for (const [kind, variable] of [['lexical', 'HONCHO_BASE_URL'], ['semantic', 'HONCHO_EMBED_BASE_URL']] as const) {
  const baseUrl = process.env[variable]
  const skip = baseUrl === undefined || baseUrl === '' ? `set ${variable} (tools/honcho-env.sh)` : false
  describe(`recall across DSH sessions on the real Honcho (${kind})`, { skip, timeout: 600_000 }, () => {
    const where = layout()
    const workspace = `artmem-dsh-${kind}-${Date.now().toString(36)}`
    const env = { [KEY_ENV]: 'no-auth-on-this-server' }
    let s1: Session
    let s2: Session

    before(async () => {
      writeFileSync(where.artmemConfig, artmemToml(where, String(baseUrl), workspace))
      s1 = await runSession(where, {
        project: 'trial',
        task: `Please remember this: ${SAID}`,
        steps: [{ call: 'memory_record', arguments: { content: SAID, kind: 'fact' } }, { say: 'Noted.' }],
      }, env)
      s2 = await runSession(where, { project: 'trial', task: ASKED, steps: [{ say: 'Millimolar.' }] }, env)
    })

    after(async () => {
      await deleteWorkspace(String(baseUrl), workspace)
      rmSync(where.root, { recursive: true, force: true })
    })

    it('session 1 records the note the person stated', () => {
      const [recorded] = toolResults(s1)
      assert.equal((recorded?.value as { recorded?: boolean } | undefined)?.recorded, true, JSON.stringify(recorded))
    })

    it('step 1 of session 2 injects a block naming the note', () => {
      const injected = userMessages(s2, 'plugin')
      assert.equal(injected.length, 1, `no recall block in session 2 (${kind})`)
      assert.ok(injected[0]?.text.includes(SAID), injected[0]?.text)
    })
  })
}
