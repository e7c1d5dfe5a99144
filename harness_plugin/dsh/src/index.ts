/**
 * artmem as a DeepSeek Harness (DSH rc.7) plugin: a thin shim over `artmem serve`.
 *
 * - starts and supervises the worker (`WorkerClient`); the Honcho key reaches only its environment;
 * - registers the worker's tools through `ctx.tools.register(defineTool(...))`;
 * - forwards every `session/event` to `events/append`, and injects first-step recall at
 *   `agent/pre-step` for root turns;
 * - on dispose (and hot reload) shuts the worker down within a bound.
 *
 * Startup fails loudly when the worker cannot start; afterwards everything fails open.
 * @module @artmem/dsh-plugin
 */

import { dirname } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import type { PreStepDecision } from '@deepseek-ai/dsh-agent'
import { credentialRef } from '@deepseek-ai/dsh-credentials'
import type {} from '@deepseek-ai/dsh-session'
import { classify, type SessionLike } from './caller.ts'
import { ConfigSchema, workerArgv, workerEnv, type PluginConfig } from './config.ts'
import { EventForwarder, Recall } from './conversation.ts'
import { parseToolList, registerTools } from './tools.ts'
import { WorkerClient } from './worker.ts'

export { ArtmemError, PluginCode } from './errors.ts'
export { ConfigError, parseConfig, type PluginConfig } from './config.ts'

export const name = 'artmem'
export const inject = ['tools']
export const Config = ConfigSchema

/**
 * Start the worker, register its tools, and hook events and recall.
 * @param ctx - the plugin's context.
 * @param config - validated by {@link Config}.
 */
export async function apply(ctx: Context, config: PluginConfig): Promise<void> {
  const keyEnv = config.honchoKeyEnv
  /** The worker's environment; the key from DSH's credentials service when composed, else ours. */
  const environment = async (): Promise<Record<string, string>> => {
    const env = workerEnv(config, process.env)
    const credentials = ctx.get('credentials')
    if (keyEnv === undefined || credentials === undefined) return env
    try {
      const resolved = await credentials.resolve(credentialRef(keyEnv))
      if (resolved !== undefined) env[keyEnv] = resolved.value
    } catch {
      ctx.logger.warn(`artmem: the credentials service could not resolve ${keyEnv}; using the environment`)
    }
    return env
  }
  const worker = new WorkerClient({
    argv: workerArgv(config),
    env: environment,
    ...keyEnv === undefined ? {} : { secretNames: [keyEnv] },
    cwd: dirname(config.configPath),
    handshakeTimeoutMs: config.handshakeTimeoutMs,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    restartInitialMs: config.restartInitialMs,
    restartMaxMs: config.restartMaxMs,
    log: (level, message) => ctx.logger[level](message),
  })
  const events = new EventForwarder(worker, {
    timeoutMs: config.requestTimeoutMs, maxQueued: config.maxQueuedEvents, maxBytes: config.maxEventBytes,
  })
  const recall = new Recall(worker, config.recallTimeoutMs)
  const uncertain = new Set<string>()
  const noteSession = (session: SessionLike): void => {
    if (!classify(session.header).certain) uncertain.add(session.id)
  }
  const status = (): Record<string, unknown> => ({
    worker: worker.status(),
    events: { ...events.counts },
    recall: { ...recall.counts },
    // Sessions with a parent but no subagent mark: DSH cannot say, so they count as children.
    sessions_classified_child_uncertain: uncertain.size,
  })

  ctx.effect(() => () => worker.close(), 'artmem worker')
  const hello = await worker.start()
  const tools = parseToolList(await worker.request('tools/list', {}, { timeoutMs: config.handshakeTimeoutMs }))
  registerTools(ctx, tools, { worker, timeoutMs: config.requestTimeoutMs, noteSession, status })

  if (hello.ops.includes('events/append')) {
    ctx.on('session/event', (session, event) => {
      noteSession(session)
      events.forward(session, event)
    })
  }
  if (hello.ops.includes('recall/first-step')) {
    ctx.on('agent/pre-step', async ({ agent, turn, step, signal }, next): Promise<PreStepDecision> => {
      if (!recall.applies(agent, step)) return next()
      // Ask first, so the worker's lookup overlaps the rest of the pre-step chain.
      const recalled = recall.fetch(agent, turn, step, signal)
      const decision = await next()
      if (decision.kind !== 'enter') return decision
      const message = await recalled
      return message === undefined ? decision : { kind: 'enter', messages: [...decision.messages, message] }
    })
  }
  ctx.logger.info(`artmem plugin ready: ${tools.length} tools, worker ${hello.version}`)
}
