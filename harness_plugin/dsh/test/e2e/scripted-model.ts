/**
 * The end-to-end tests' model: a keyless DSH `LlmAdapter` (provider `scripted`) that plays a
 * fixed list of steps, one per model request: call a tool, or answer with text. An argument
 * `{"$last": "a.0.b"}` takes that path from the previous tool result's JSON. With `export`, the
 * plugin also places a file in `<rlmRoot>/sessions/<session id>/exports/` before the first step,
 * as an RLM kernel would.
 */

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import {
  CallId,
  LlmAdapter,
  ReasoningEffortId,
  type GenerateOptions,
  type LlmResolvedModelInfo,
  type Message,
  type StreamChunk,
} from '@deepseek-ai/dsh-llm'

/** One model step. */
export type Step =
  | { readonly call: string; readonly arguments: Record<string, unknown> }
  | { readonly say: string }

/** The plugin's configuration. */
export interface Config {
  readonly steps: readonly Step[]
  readonly export?: { readonly rlmRoot: string; readonly name: string; readonly content: string }
}

const OFF = ReasoningEffortId('off')

function lastToolResult(messages: readonly Message[]): unknown {
  for (const message of [...messages].reverse()) {
    for (const block of message.content) {
      if (block.type !== 'tool-result') continue
      const text = block.content.map(part => (part.type === 'text' ? part.text : '')).join('')
      try {
        return JSON.parse(text)
      } catch {
        return text
      }
    }
  }
  return undefined
}

function pick(value: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], value)
}

function resolveArguments(args: Record<string, unknown>, last: unknown): Record<string, unknown> {
  return Object.fromEntries(Object.entries(args).map(([key, value]) => {
    const path = (value as { $last?: unknown } | null)?.$last
    return [key, typeof path === 'string' ? pick(last, path) : value]
  }))
}

class ScriptedAdapter extends LlmAdapter {
  readonly #steps: readonly Step[]

  constructor(steps: readonly Step[]) {
    super()
    this.#steps = steps
  }

  override async resolveModel(provider: string, model: string): Promise<LlmResolvedModelInfo> {
    return { provider, id: model, name: model, reasoning: { efforts: [{ id: OFF, name: 'Off' }], defaultEffort: OFF } }
  }

  async * stream(options: GenerateOptions): AsyncIterable<StreamChunk> {
    const index = options.messages.filter(message => message.role === 'assistant').length
    const step = this.#steps[index] ?? { say: 'The script is over.' }
    if ('say' in step) {
      yield { type: 'block-start', index: 0, blockType: 'text' }
      yield { type: 'text-delta', index: 0, text: step.say }
      yield { type: 'block-end', index: 0, block: { type: 'text', text: step.say } }
      yield { type: 'finish', reason: { kind: 'stop' } }
      return
    }
    const id = CallId(`scripted-${index + 1}`)
    const args = JSON.stringify(resolveArguments(step.arguments, lastToolResult(options.messages)))
    yield { type: 'block-start', index: 0, blockType: 'tool-call' }
    yield { type: 'tool-call-delta', index: 0, id, name: step.call, argumentsDelta: args }
    yield { type: 'block-end', index: 0, block: { type: 'tool-call', id, name: step.call, arguments: args } }
    yield { type: 'finish', reason: { kind: 'tool-calls' } }
  }
}

export const name = 'artmem-e2e-scripted-model'
export const inject = ['llm']

/**
 * Register the `scripted` provider, and place the export file when configured.
 * @param ctx - the plugin's context.
 * @param config - the script.
 */
export function apply(ctx: Context, config: Config): void {
  ctx.llm.registerAdapter(['scripted'], new ScriptedAdapter(config.steps))
  const file = config.export
  if (file === undefined) return
  ctx.on('agent/pre-step', async ({ agent, step }, next) => {
    if (step === 1) {
      const exports = join(file.rlmRoot, 'sessions', agent.id, 'exports')
      mkdirSync(exports, { recursive: true, mode: 0o700 })
      writeFileSync(join(exports, file.name), file.content)
    }
    return next()
  })
}
