/**
 * End to end against the real harness: DSH rc.7 booted headless by its own driver, a scripted
 * model, this plugin, a real `artmem serve`, and the HTTP fake of Honcho. Four sessions run
 * once, in order, and the tests read what they left:
 *   1. project trial: the model records a file placed in its session's exports/;
 *   2. project trial, new session: search finds the card, resolve returns the verified bytes;
 *   3. project other: neither the card nor recall;
 *   4. project trial: the worker is killed with a call in flight; the call fails with a typed
 *      error, the next call works, the turn completes.
 * Capture and recall (events/append, recall/first-step) are on for every session.
 */

import assert from 'node:assert/strict'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import {
  ARTMEM, ASSISTANT_PEER, FakeHonchoServer, KEY_ENV, USER_PEER, artmemToml, honchoSession, layout, run, runSession, toolResults, userMessages,
  type HonchoMessage, type Session,
} from './harness.ts'

const WORKSPACE = 'artmem-e2e'
const honchoKey = 'e2e-honcho-7c1d0a'
const EXPORT = { name: 'cohort.csv', content: 'cohort,response_rate\na,0.42\nb,0.37\n' }
const FINGERPRINT = 'c0ffee'.repeat(10) + 'c0ff'
const TASK_1 = 'record the cohort response table'
const ANSWER_1 = 'Recorded the cohort response table.'
const TASK_2 = 'cohort response table'
const ANSWER_2 = 'Found and resolved the earlier table.'
const CRASH_RELAY = join(dirname(fileURLToPath(import.meta.url)), 'crash-relay.ts')

describe('artmem inside the real DeepSeek Harness', { timeout: 600_000 }, () => {
  const where = layout()
  const env = { [KEY_ENV]: honchoKey }
  let honcho: FakeHonchoServer
  let s1: Session
  let s2: Session
  let s3: Session
  let s4: Session
  let experimentId = ''
  let messages: HonchoMessage[] = []

  before(async () => {
    const started = await FakeHonchoServer.start(honchoKey)
    honcho = started.server
    writeFileSync(where.artmemConfig, artmemToml(where, started.baseUrl, WORKSPACE))
    s1 = await runSession(where, {
      project: 'trial',
      task: TASK_1,
      export: EXPORT,
      steps: [
        {
          call: 'memory_artifact_record',
          arguments: {
            source_path: EXPORT.name, title: 'Cohort response table', summary: 'Response rate per cohort.',
            query_fingerprint: FINGERPRINT, source: 'warehouse', source_version: 'v1', media_type: 'text/csv',
          },
        },
        { say: ANSWER_1 },
      ],
    }, env)
    experimentId = String((toolResults(s1)[0]?.value as { experiment_id?: string } | undefined)?.experiment_id)
    const findAndResolve = (id: unknown) => [
      { call: 'memory_search', arguments: { query: 'cohort response' } },
      { call: 'memory_artifact_resolve', arguments: { experiment_id: id } },
      { call: 'memory_status', arguments: {} },
      { say: ANSWER_2 },
    ]
    s2 = await runSession(where, { project: 'trial', task: TASK_2, steps: findAndResolve({ $last: 'hits.0.experiment_id' }) }, env)
    s3 = await runSession(where, { project: 'other', task: TASK_2, steps: findAndResolve(experimentId) }, env)
    s4 = await runSession(where, {
      project: 'trial',
      task: 'search memory while the worker dies',
      command: [process.execPath, CRASH_RELAY, ARTMEM],
      steps: [
        { call: 'memory_search', arguments: { query: 'artmem-e2e-crash' } },
        { call: 'memory_search', arguments: { query: 'cohort response' } },
        { call: 'memory_status', arguments: {} },
        { say: 'Done despite the crash.' },
      ],
    }, env)
    messages = await honcho.messages(WORKSPACE)
  })

  after(async () => {
    await honcho?.stop()
    if (process.env['ARTMEM_E2E_KEEP'] === undefined) rmSync(where.root, { recursive: true, force: true })
    else process.stderr.write(`kept ${where.root}\n`)
  })

  /** The plugin's recall counters, from the session's last `memory_status`. */
  const recallStatus = (session: Session): unknown =>
    (toolResults(session).at(-1)?.value as { dsh_plugin?: { recall?: unknown } } | undefined)?.dsh_plugin?.recall

  /** The (peer, content) pairs of a session's Honcho conversation. */
  const exchange = (session: Session): string[][] => messages
    .filter(message => message.session_id === honchoSession(session.id))
    .map(message => [message.peer_id, message.content])

  it('session 1 records the export of its own session for the project of its cwd', async () => {
    const [recorded] = toolResults(s1)
    assert.equal(recorded?.isError, false, recorded?.text)
    assert.equal((recorded?.value as { local_saved: boolean }).local_saved, true)
    assert.match(experimentId, /^exp_[a-z2-7]{52}$/)
    const show = (project: string) => run([ARTMEM, '--config', where.artmemConfig, '--project', project, 'show', experimentId, '--json'], { cwd: where.root, env: { ...process.env, ...env } })
    assert.equal((await show('trial-analysis')).code, 0)
    assert.notEqual((await show('other-project')).code, 0)
    assert.equal(s1.output, ANSWER_1)
  })

  it('session 2, same project: search shows the card, resolve returns the verified bytes', () => {
    assert.notEqual(s2.id, s1.id)
    const [found, resolved] = toolResults(s2)
    const hits = (found?.value as { hits: { experiment_id: string; trust: string }[] }).hits
    assert.equal(hits[0]?.experiment_id, experimentId)
    assert.equal(hits[0]?.trust, 'untrusted-data')
    assert.equal(resolved?.isError, false, resolved?.text)
    const path = (resolved?.value as { path: string }).path
    assert.ok(path.startsWith(`${where.artifactRoot}/`))
    assert.equal(readFileSync(path, 'utf8'), EXPORT.content)
  })

  it('a session in another project gets neither the card nor recall', () => {
    const [found, resolved] = toolResults(s3)
    assert.deepEqual((found?.value as { hits: unknown[] }).hits, [])
    assert.equal(resolved?.isError, true)
    assert.deepEqual(userMessages(s3, 'plugin'), [])
  })

  it('killing the worker mid-call: typed error, the next call works, the turn completes', () => {
    const [crashed, searched, status] = toolResults(s4)
    assert.equal(crashed?.isError, true)
    assert.match(crashed?.text ?? '', /plugin\.worker_crashed/)
    assert.equal(searched?.isError, false, searched?.text)
    assert.equal((searched?.value as { hits: { experiment_id: string }[] }).hits[0]?.experiment_id, experimentId)
    const plugin = (status?.value as { dsh_plugin: { worker: { crashes: number; starts: number; state: string } } }).dsh_plugin
    assert.deepEqual([plugin.worker.crashes, plugin.worker.starts, plugin.worker.state], [1, 2, 'ready'])
    const end = s4.events.find(event => event.type === 'turn/end')
    assert.equal(end?.data.reason?.kind, 'completed')
    assert.equal(s4.output, 'Done despite the crash.')
  })

  it('the Honcho key reaches no event, tool result, or log', () => {
    for (const session of [s1, s2, s3, s4]) {
      assert.ok(!session.stdout.includes(honchoKey))
      assert.ok(!session.stderr.includes(honchoKey))
    }
  })

  it('capture: the fake Honcho receives exactly each completed exchange, no tool output', () => {
    assert.deepEqual(exchange(s1), [[USER_PEER, TASK_1], [ASSISTANT_PEER, ANSWER_1]])
    assert.deepEqual(exchange(s2), [[USER_PEER, TASK_2], [ASSISTANT_PEER, ANSWER_2]])
  })

  it('recall: step 1 of session 2 gets the block once, with plugin source, never recaptured', () => {
    const injected = userMessages(s2, 'plugin')
    assert.equal(injected.length, 1, `recall in session 2: ${JSON.stringify(recallStatus(s2))}`)
    assert.equal(injected[0]?.plugin, 'artmem')
    assert.match(injected[0]?.text ?? '', /untrusted/i)
    assert.match(injected[0]?.text ?? '', /cohort response table/i)
    const stepTwo = s2.events.find(event => event.type === 'step/start' && event.data.step === 2)
    assert.ok((injected[0]?.seq ?? Infinity) < (stepTwo?.seq ?? -Infinity), 'recall enters step 1')
    assert.ok(!messages.some(message => message.content.includes(injected[0]?.text ?? '\0')))
    assert.deepEqual(userMessages(s3, 'plugin'), [])
  })
})
