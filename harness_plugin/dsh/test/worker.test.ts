/** The supervisor against a fake worker process: replies, failures, crashes, restarts, close. */

import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { ArtmemError, PluginCode } from '../src/errors.ts'
import { WorkerClient, type Schedule, type WorkerOptions } from '../src/worker.ts'

const FAKE = fileURLToPath(new URL('./fake-worker.ts', import.meta.url))
const CALLER = { session_id: 's1', cwd: '/work/trial', call_id: 'c1', root_call_id: 'c1', agent_kind: 'root' } as const

interface Harness {
  readonly worker: WorkerClient
  readonly logs: string[]
}

function fake(mode = 'normal', options: Partial<WorkerOptions> = {}): Harness {
  const logs: string[] = []
  const worker = new WorkerClient({
    argv: [process.execPath, FAKE, mode],
    env: () => ({ PATH: process.env['PATH'] ?? '' }),
    handshakeTimeoutMs: 10_000,
    shutdownTimeoutMs: 10_000,
    restartInitialMs: 1,
    restartMaxMs: 1,
    log: (_level, message) => logs.push(message),
    ...options,
  })
  return { worker, logs }
}

function call(worker: WorkerClient, name: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<unknown> {
  return worker.request('tools/call', { name, arguments: { n: 1 } }, { caller: CALLER, timeoutMs: 10_000, ...options })
}

/** A schedule the test runs by hand: `delays` is what was asked, `nth(n)` the n-th restart. */
function manualSchedule(): { schedule: Schedule; delays: number[]; nth: (n: number) => Promise<() => void> } {
  const delays: number[] = []
  const runs: (() => void)[] = []
  let wake: (() => void) | undefined
  const schedule: Schedule = (ms, run) => {
    delays.push(ms)
    runs.push(run)
    wake?.()
    return () => undefined
  }
  const nth = (n: number): Promise<() => void> => new Promise((resolve) => {
    const check = (): void => {
      const run = runs[n]
      if (run === undefined) wake = check
      else resolve(run)
    }
    check()
  })
  return { schedule, delays, nth }
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<ArtmemError> {
  const error = await promise.then(() => assert.fail(`expected ${code}`), (e: unknown) => e)
  assert.ok(error instanceof ArtmemError, String(error))
  assert.equal(error.code, code)
  return error
}

describe('WorkerClient', () => {
  it('shakes hands, sends the caller, and gets results', async () => {
    const { worker } = fake()
    const hello = await worker.start()
    assert.equal(hello.version, '0.0.0-fake')
    const result = await call(worker, 'echo') as { caller: unknown; arguments: unknown }
    assert.deepEqual(result.caller, CALLER)
    assert.deepEqual(result.arguments, { n: 1 })
    assert.equal(worker.status().state, 'ready')
    await worker.close()
    assert.equal(worker.status().state, 'closed')
  })

  it('turns a worker error into an ArtmemError with its code', async () => {
    const { worker } = fake()
    await worker.start()
    const error = await rejectsWith(call(worker, 'fail'), 'cas.path_escape')
    assert.equal(error.retryable, false)
    assert.match(error.message, /cas\.path_escape/)
    await worker.close()
  })

  it('matches out-of-order replies by id', async () => {
    const { worker } = fake()
    await worker.start()
    const order: string[] = []
    const held = call(worker, 'hold').then(() => order.push('held'))
    const echoed = call(worker, 'echo').then(() => order.push('echo'))
    await Promise.all([held, echoed])
    assert.deepEqual(order, ['echo', 'held'])
    await worker.close()
  })

  it('skips a line that is not a reply, and fails a malformed reply with its id', async () => {
    const { worker } = fake()
    await worker.start()
    assert.deepEqual(await call(worker, 'garbage'), { after: 'garbage' })
    await rejectsWith(call(worker, 'bad'), PluginCode.PROTOCOL)
    assert.equal(worker.status().malformedReplies, 2)
    assert.deepEqual((await call(worker, 'echo') as { arguments: unknown }).arguments, { n: 1 })
    await worker.close()
  })

  it('times a request out and keeps working', async () => {
    const { worker } = fake()
    await worker.start()
    await rejectsWith(call(worker, 'hang', { timeoutMs: 30 }), PluginCode.TIMEOUT)
    assert.equal(worker.status().inFlight, 0)
    await call(worker, 'echo')
    await worker.close()
  })

  it('honours an abort signal, before and during a request', async () => {
    const { worker } = fake()
    await worker.start()
    const controller = new AbortController()
    const pending = call(worker, 'hang', { signal: controller.signal })
    controller.abort()
    await rejectsWith(pending, PluginCode.ABORTED)
    await rejectsWith(call(worker, 'echo', { signal: controller.signal }), PluginCode.ABORTED)
    assert.equal(worker.status().inFlight, 0)
    await worker.close()
  })

  it('fails the call in flight when the worker dies, restarts it, and the next call works', async () => {
    const { worker, logs } = fake()
    await worker.start()
    const before = await call(worker, 'echo') as { pid: number }
    const error = await rejectsWith(call(worker, 'crash'), PluginCode.WORKER_CRASHED)
    assert.equal(error.retryable, true)
    const after = await call(worker, 'echo') as { pid: number }
    assert.notEqual(after.pid, before.pid)
    assert.equal(worker.status().pid, after.pid)
    assert.deepEqual({ starts: worker.status().starts, crashes: worker.status().crashes }, { starts: 2, crashes: 1 })
    assert.ok(logs.some(line => line.includes('restarting in 1 ms')))
    await worker.close()
  })

  it('holds requests made while restarting and sends them in order to the new worker', async () => {
    const { schedule, nth } = manualSchedule()
    const { worker } = fake('normal', { schedule })
    await worker.start()
    await rejectsWith(call(worker, 'crash'), PluginCode.WORKER_CRASHED)
    assert.equal(worker.status().state, 'backoff')
    const a = call(worker, 'echo') as Promise<{ received: number }>
    const b = call(worker, 'echo') as Promise<{ received: number }>
    await rejectsWith(call(worker, 'echo', { timeoutMs: 20 }), PluginCode.WORKER_UNAVAILABLE)
    const restart = await nth(0)
    restart()
    const [ra, rb] = await Promise.all([a, b])
    assert.deepEqual([ra.received, rb.received], [2, 3]) // after the new worker's hello
    await worker.close()
  })

  it('backs off exponentially up to the cap when the worker keeps dying', async () => {
    const { schedule, delays, nth } = manualSchedule()
    const { worker } = fake('exit-after-hello', { schedule, restartInitialMs: 10, restartMaxMs: 80 })
    await worker.start()
    for (let n = 0; n < 5; n += 1) {
      const restart = await nth(n)
      restart()
    }
    await nth(5)
    assert.deepEqual(delays, [10, 20, 40, 80, 80, 80])
    await worker.close()
  })

  it('refuses a worker that speaks another protocol, leaving nothing running', async () => {
    const { worker } = fake('bad-protocol')
    await rejectsWith(worker.start(), PluginCode.PROTOCOL)
    assert.equal(worker.status().state, 'closed')
    assert.equal(worker.status().pid, undefined)
  })

  it('fails start, leaving nothing running, when the command does not exist', async () => {
    const { worker } = fake('normal', { argv: ['/nonexistent/artmem', 'serve'] })
    const error = await rejectsWith(worker.start(), PluginCode.WORKER_CRASHED)
    assert.match(error.message, /could not start: ENOENT/)
    assert.equal(worker.status().state, 'closed')
  })

  it('closes mid-call: shutdown is sent, the call fails as disposed, later calls are refused', async () => {
    const { worker, logs } = fake()
    await worker.start()
    const pending = call(worker, 'hang')
    await worker.close()
    await rejectsWith(pending, PluginCode.DISPOSED)
    await rejectsWith(call(worker, 'echo'), PluginCode.DISPOSED)
    assert.ok(logs.includes('artmem worker: op shutdown'))
    assert.equal(worker.status().pid, undefined)
  })

  it('terminates a worker that does not exit after shutdown, within the bound', async () => {
    const { worker, logs } = fake('ignore-eof', { shutdownTimeoutMs: 50 })
    await worker.start()
    await worker.close()
    assert.ok(logs.some(line => line.includes('did not exit within 50 ms')))
    assert.equal(worker.status().state, 'closed')
  })

  it('passes only the configured environment, and never logs the secret', async () => {
    const { worker, logs } = fake('normal', {
      env: () => ({ PATH: process.env['PATH'] ?? '', FAKE_HIDDEN: 'hidden-value-9f8e7d' }),
      secretNames: ['FAKE_HIDDEN'],
    })
    await worker.start()
    const { env } = await call(worker, 'echo') as { env: string[] }
    assert.deepEqual(env.filter(name => name !== 'PATH' && name !== 'FAKE_HIDDEN'), [])
    await worker.close()
    assert.ok(logs.includes('artmem worker: starting with [redacted]'))
    assert.ok(!logs.some(line => line.includes('hidden-value-9f8e7d')))
  })
})
