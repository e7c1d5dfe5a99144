/**
 * `WorkerClient` runs one `artmem serve` process and supervises it: the `hello` handshake, one
 * pending map keyed by request id, per-request timeouts and abort signals, restart with
 * exponential backoff after a crash (in-flight requests fail with `plugin.worker_crashed`), and a
 * bounded `shutdown` on close. Requests made while no worker is ready wait, in order, for the
 * next one, within their own timeout.
 * @module
 */

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { createInterface } from 'node:readline'
import { ArtmemError, PluginCode } from './errors.ts'
import { checkHello, encodeRequest, parseReply, type Caller, type Hello } from './protocol.ts'

/** After a signal, how long to wait for the process before the next, harder one. */
const KILL_GRACE_MS = 2000
/** The longest worker log line forwarded to the DSH logger. */
const MAX_LOG_CHARS = 2000

/** Starts a timer and returns how to cancel it; injectable so tests can observe backoff. */
export type Schedule = (ms: number, run: () => void) => () => void

/** How to run and supervise the worker. */
export interface WorkerOptions {
  /** The whole command line, e.g. `['/venv/bin/artmem', 'serve', '--config', '/etc/artmem.toml']`. */
  readonly argv: readonly string[]
  /** The worker's complete environment, resolved again for every start: a changed key reaches the next worker. */
  readonly env: () => Readonly<Record<string, string>> | Promise<Readonly<Record<string, string>>>
  /** Variables of that environment whose values are never forwarded from the worker's stderr. */
  readonly secretNames?: readonly string[]
  readonly cwd?: string
  readonly handshakeTimeoutMs: number
  /** Bound on `close()`: the shutdown reply, then the worker's own drain and exit. */
  readonly shutdownTimeoutMs: number
  /** First restart delay; it doubles with each crash up to `restartMaxMs`. */
  readonly restartInitialMs: number
  readonly restartMaxMs: number
  readonly log: (level: 'debug' | 'info' | 'warn', message: string) => void
  readonly schedule?: Schedule
}

/** Per-request options. */
export interface RequestOptions {
  readonly caller?: Caller | null
  /** Covers waiting for a ready worker as well as the reply. */
  readonly timeoutMs: number
  readonly signal?: AbortSignal
}

/** Content-free state of the supervisor, for status. */
export interface WorkerStatus {
  readonly state: 'starting' | 'ready' | 'backoff' | 'closing' | 'closed'
  readonly pid?: number
  readonly version?: string
  readonly starts: number
  readonly crashes: number
  readonly inFlight: number
  readonly lateReplies: number
  readonly malformedReplies: number
}

/** One worker process. */
interface Proc {
  readonly child: ChildProcessWithoutNullStreams
  alive: boolean
  readonly exited: Promise<void>
}

/** One request awaiting its reply; `sentTo` is set once its line was written. */
interface Pending {
  readonly op: string
  readonly line: string
  sentTo?: Proc
  resolve(result: unknown): void
  reject(error: ArtmemError): void
  cleanup(): void
}

const defaultSchedule: Schedule = (ms, run) => {
  const timer = setTimeout(run, ms)
  return () => clearTimeout(timer)
}

/** The supervisor of one `artmem serve` process at a time. */
export class WorkerClient {
  readonly #options: WorkerOptions
  readonly #schedule: Schedule
  readonly #pending = new Map<number, Pending>()
  /** Ids waiting for a ready worker, in request order. */
  #unsent: number[] = []
  #nextId = 1
  #state: WorkerStatus['state'] = 'starting'
  #proc: Proc | undefined
  #hello: Hello | undefined
  #secrets: string[] = []
  #cancelRestart: (() => void) | undefined
  #closed: Promise<void> | undefined
  /** Crashes since the last sign of a healthy worker (a reply to anything but `hello`). */
  #failures = 0
  #starts = 0
  #crashes = 0
  #late = 0
  #malformed = 0

  constructor(options: WorkerOptions) {
    this.#options = options
    this.#schedule = options.schedule ?? defaultSchedule
  }

  /**
   * Start the first worker and shake hands.
   * @returns the worker's greeting.
   * @throws ArtmemError when it cannot start or speaks another protocol; nothing is left running.
   */
  async start(): Promise<Hello> {
    try {
      return await this.#launch()
    } catch (error: unknown) {
      await this.close()
      throw error
    }
  }

  /**
   * Send one request and wait for its result.
   * @param op - the operation.
   * @param params - its parameters.
   * @param options - caller, timeout and abort signal.
   * @returns the worker's result.
   * @throws ArtmemError with the worker's code, or a `plugin.*` code.
   */
  request(op: string, params: object, options: RequestOptions): Promise<unknown> {
    if (this.#state === 'closing' || this.#state === 'closed') {
      return Promise.reject(new ArtmemError(PluginCode.DISPOSED, 'the artmem plugin is shutting down'))
    }
    return this.#enqueue(op, params, options, undefined)
  }

  /** Content-free state, for status. */
  status(): WorkerStatus {
    const pid = this.#proc?.alive === true ? this.#proc.child.pid : undefined
    return {
      state: this.#state,
      ...pid === undefined ? {} : { pid },
      ...this.#hello === undefined ? {} : { version: this.#hello.version },
      starts: this.#starts,
      crashes: this.#crashes,
      inFlight: this.#pending.size,
      lateReplies: this.#late,
      malformedReplies: this.#malformed,
    }
  }

  /**
   * Stop: refuse new requests, send `shutdown`, close the worker's input and wait for it to drain
   * and exit within `shutdownTimeoutMs`, then SIGTERM and SIGKILL. Requests still unanswered fail
   * with `plugin.disposed`. Idempotent.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close()
    return this.#closed
  }

  async #close(): Promise<void> {
    this.#state = 'closing'
    this.#cancelRestart?.()
    this.#failAll(id => this.#pending.get(id)?.sentTo === undefined, PluginCode.DISPOSED, 'the artmem plugin is shutting down')
    const proc = this.#proc
    if (proc?.alive === true) {
      const budget = this.#options.shutdownTimeoutMs
      await this.#enqueue('shutdown', {}, { timeoutMs: Math.min(budget, KILL_GRACE_MS) }, proc).catch(() => undefined)
      proc.child.stdin.end()
      if (!await exitsWithin(proc, budget)) {
        this.#options.log('warn', `artmem worker did not exit within ${budget} ms of shutdown; terminating it`)
        proc.child.kill('SIGTERM')
        if (!await exitsWithin(proc, KILL_GRACE_MS)) {
          proc.child.kill('SIGKILL')
          await exitsWithin(proc, KILL_GRACE_MS)
        }
      }
    }
    this.#failAll(() => true, PluginCode.DISPOSED, 'the artmem plugin shut down before the worker answered')
    this.#state = 'closed'
  }

  /** Spawn a worker and shake hands; on success, send what waited for it. */
  async #launch(): Promise<Hello> {
    this.#state = 'starting'
    const env = await this.#options.env()
    if (this.#state !== 'starting') throw new ArtmemError(PluginCode.DISPOSED, 'the artmem plugin is shutting down')
    this.#secrets = (this.#options.secretNames ?? []).flatMap((name) => {
      const value = env[name]
      return value === undefined || value === '' ? [] : [value]
    })
    const proc = this.#spawn(env)
    try {
      const hello = checkHello(await this.#enqueue('hello', {}, { timeoutMs: this.#options.handshakeTimeoutMs }, proc))
      if (this.#state !== 'starting' || this.#proc !== proc) throw new ArtmemError(PluginCode.DISPOSED, 'superseded')
      this.#hello = hello
      this.#state = 'ready'
      this.#options.log('info', `artmem worker ready (pid ${String(proc.child.pid)}, version ${hello.version})`)
      this.#flush()
      return hello
    } catch (error: unknown) {
      // A live worker that failed the handshake is useless: kill it, and the exit handler backs
      // off and tries again. When closing, `close()` owns the worker and lets it drain.
      if (proc.alive && this.#state === 'starting') proc.child.kill('SIGKILL')
      throw error
    }
  }

  #spawn(env: Readonly<Record<string, string>>): Proc {
    const [command, ...args] = this.#options.argv
    if (command === undefined) throw new ArtmemError(PluginCode.WORKER_UNAVAILABLE, 'no worker command configured')
    const child = spawn(command, args, {
      env: { ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
      ...this.#options.cwd === undefined ? {} : { cwd: this.#options.cwd },
    })
    let markExited!: () => void
    const proc: Proc = { child, alive: true, exited: new Promise(resolve => { markExited = resolve }) }
    this.#proc = proc
    this.#starts += 1
    // A write to a worker that just died fails with EPIPE; its exit is handled below.
    child.stdin.on('error', () => undefined)
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', line => this.#onLine(proc, line))
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', line => this.#onLog(line))
    const exited = (how: string): void => {
      if (!proc.alive) return
      proc.alive = false
      markExited()
      this.#onExit(proc, how)
    }
    // `close` (not `exit`): every reply the worker wrote before exiting has been read by then.
    child.on('close', (code, signal) => exited(code === null ? `signal ${String(signal)}` : `code ${code}`))
    child.on('error', (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined) exited(`could not start: ${error.code ?? error.name}`)
      else this.#options.log('warn', `artmem worker process error: ${error.code ?? error.name}`)
    })
    return proc
  }

  #enqueue(op: string, params: object, options: RequestOptions, direct: Proc | undefined): Promise<unknown> {
    if (options.signal?.aborted === true) {
      return Promise.reject(new ArtmemError(PluginCode.ABORTED, `${op} was cancelled`))
    }
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const sent = this.#pending.get(id)?.sentTo !== undefined
        this.#settle(id, sent
          ? new ArtmemError(PluginCode.TIMEOUT, `${op}: no reply within ${options.timeoutMs} ms`, true)
          : new ArtmemError(PluginCode.WORKER_UNAVAILABLE, `${op}: no artmem worker ready within ${options.timeoutMs} ms`, true))
      }, options.timeoutMs)
      const onAbort = (): void => {
        this.#settle(id, new ArtmemError(PluginCode.ABORTED, `${op} was cancelled`))
      }
      options.signal?.addEventListener('abort', onAbort, { once: true })
      this.#pending.set(id, {
        op,
        line: encodeRequest(id, op, options.caller ?? null, params),
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer)
          options.signal?.removeEventListener('abort', onAbort)
        },
      })
      if (direct !== undefined) this.#write(id, direct)
      else if (this.#state === 'ready' && this.#proc !== undefined) this.#write(id, this.#proc)
      else this.#unsent.push(id)
    })
  }

  #write(id: number, proc: Proc): void {
    const entry = this.#pending.get(id)
    if (entry === undefined) return
    entry.sentTo = proc
    proc.child.stdin.write(entry.line)
  }

  #flush(): void {
    const waiting = this.#unsent
    this.#unsent = []
    for (const id of waiting) {
      if (this.#proc !== undefined) this.#write(id, this.#proc)
    }
  }

  /** Settle one request with a result or an error; false when it was already settled. */
  #settle(id: number, outcome: ArtmemError | { result: unknown }): boolean {
    const entry = this.#pending.get(id)
    if (entry === undefined) return false
    this.#pending.delete(id)
    entry.cleanup()
    if (outcome instanceof ArtmemError) entry.reject(outcome)
    else entry.resolve(outcome.result)
    return true
  }

  #failAll(which: (id: number) => boolean, code: string, message: string, retryable = false): void {
    for (const id of [...this.#pending.keys()]) {
      if (which(id)) this.#settle(id, new ArtmemError(code, message, retryable))
    }
    this.#unsent = this.#unsent.filter(id => this.#pending.has(id))
  }

  #onLine(proc: Proc, line: string): void {
    if (line.trim() === '') return
    const reply = parseReply(line)
    const id = typeof reply.id === 'number' ? reply.id : -1
    const entry = this.#pending.get(id)
    const mine = entry?.sentTo === proc
    if (reply.kind === 'malformed') {
      this.#malformed += 1
      this.#options.log('warn', 'artmem worker wrote a line that is not a protocol reply')
      if (mine) this.#settle(id, new ArtmemError(PluginCode.PROTOCOL, 'the worker sent a malformed reply'))
      return
    }
    if (!mine) {
      this.#late += 1 // timed out, cancelled, or an id that was never ours
      return
    }
    if (reply.kind === 'ok') {
      if (entry?.op !== 'hello') this.#failures = 0
      this.#settle(id, { result: reply.result })
    } else {
      this.#settle(id, new ArtmemError(reply.error.code, reply.error.message, reply.error.retryable))
    }
  }

  #onLog(line: string): void {
    const safe = this.#secrets.reduce((text, secret) => text.split(secret).join('[redacted]'), line)
    this.#options.log('debug', `artmem worker: ${safe.slice(0, MAX_LOG_CHARS)}`)
  }

  #onExit(proc: Proc, how: string): void {
    if (this.#proc !== proc) return
    const closing = this.#state === 'closing' || this.#state === 'closed'
    this.#failAll(
      id => this.#pending.get(id)?.sentTo === proc,
      closing ? PluginCode.DISPOSED : PluginCode.WORKER_CRASHED,
      closing ? 'the artmem worker stopped before answering' : `the artmem worker ended (${how}) before answering`,
      !closing,
    )
    if (closing) return
    this.#crashes += 1
    const delay = Math.min(this.#options.restartMaxMs, this.#options.restartInitialMs * 2 ** this.#failures)
    this.#failures += 1
    this.#state = 'backoff'
    this.#options.log('warn', `artmem worker ended (${how}); restarting in ${delay} ms`)
    this.#cancelRestart = this.#schedule(delay, () => {
      this.#cancelRestart = undefined
      if (this.#state !== 'backoff') return
      this.#launch().catch((error: unknown) => {
        this.#options.log('warn', `artmem worker restart failed: ${error instanceof ArtmemError ? error.code : 'spawn error'}`)
      })
    })
  }
}

/** Whether `proc` exits within `ms` (a bounded wait on its exit, not a sleep). */
async function exitsWithin(proc: Proc, ms: number): Promise<boolean> {
  if (!proc.alive) return true
  let cancel: (() => void) | undefined
  const timedOut = new Promise<false>(resolve => {
    const timer = setTimeout(() => resolve(false), ms)
    cancel = () => clearTimeout(timer)
  })
  const result = await Promise.race([proc.exited.then(() => true as const), timedOut])
  cancel?.()
  return result
}
