/**
 * The worker's tools as DSH tools: one `defineTool` each, with the worker's schemas projected
 * onto DSH's DSL, forwarding every call as `tools/call` with a caller built from the execution
 * context. Results are the worker's JSON, untrusted-data labels included; failures are
 * `ArtmemError`s carrying the worker's code.
 * @module
 */

import type { Context } from '@deepseek-ai/cordis'
import { defineTool, type ValueSchemaSpec } from '@deepseek-ai/dsh-tools'
import { toolCaller, type SessionLike } from './caller.ts'
import { ArtmemError, PluginCode } from './errors.ts'
import { toParameters, toValueSchema } from './schema.ts'
import type { WorkerClient } from './worker.ts'

/** One tool as `tools/list` describes it. */
export interface WorkerTool {
  readonly name: string
  readonly description: string
  readonly parameters: unknown
  readonly output: unknown
}

/** The tool whose result also carries the plugin's own status. */
const STATUS_TOOL = 'memory_status'

/**
 * Read the `tools/list` result.
 * @param result - `{tools: [{name, description, parameters, output?}]}`.
 * @returns the tools.
 * @throws ArtmemError `plugin.protocol` for any other shape.
 */
export function parseToolList(result: unknown): WorkerTool[] {
  const tools = typeof result === 'object' && result !== null ? (result as { tools?: unknown }).tools : undefined
  if (!Array.isArray(tools)) throw new ArtmemError(PluginCode.PROTOCOL, 'tools/list: expected {tools: [...]}')
  return tools.map((tool: unknown) => {
    const { name, description, parameters, output } = (tool ?? {}) as Record<string, unknown>
    if (typeof name !== 'string' || typeof description !== 'string') {
      throw new ArtmemError(PluginCode.PROTOCOL, 'tools/list: every tool needs a name and a description')
    }
    return { name, description, parameters, output }
  })
}

/**
 * A tool's output schema as DSH checks it: the worker's, projected, with `dsh_plugin` declared on
 * `memory_status` (the plugin adds it; a closed object would otherwise reject the result).
 * @param tool - the worker's tool.
 * @returns the value schema.
 */
export function outputSchema(tool: WorkerTool): ValueSchemaSpec {
  const schema = toValueSchema(tool.output)
  if (tool.name !== STATUS_TOOL || !('type' in schema) || schema.type !== 'object') return schema
  const status: ValueSchemaSpec = { type: 'object', additionalProperties: true, description: "The DSH plugin's own status." }
  return { ...schema, properties: { ...schema.properties, dsh_plugin: status } }
}

/** What tool registration needs besides the tools. */
export interface ToolHost {
  readonly worker: Pick<WorkerClient, 'request'>
  readonly timeoutMs: number
  /** Called with every tool caller's session, to count sessions whose kind was a guess. */
  readonly noteSession: (session: SessionLike) => void
  /** The plugin's status, added to `memory_status` results as `dsh_plugin`. */
  readonly status: () => Record<string, unknown>
}

/**
 * Register every worker tool on `ctx.tools`; they unregister with the plugin.
 * @param ctx - the plugin's context.
 * @param tools - the worker's tools.
 * @param host - the worker and the plugin's bookkeeping.
 */
export function registerTools(ctx: Context, tools: readonly WorkerTool[], host: ToolHost): void {
  for (const tool of tools) {
    ctx.tools.register(defineTool({
      name: tool.name,
      description: tool.description,
      parameters: toParameters(tool.parameters),
      output: {
        schema: outputSchema(tool),
        render: (_args, value) => [{ type: 'text', text: JSON.stringify(value) }],
      },
      async execute(args, exec) {
        const caller = toolCaller(exec)
        if (exec.agent !== undefined) host.noteSession(exec.agent.session)
        const result = await host.worker.request(
          'tools/call',
          { name: tool.name, arguments: args },
          { caller, timeoutMs: host.timeoutMs, signal: exec.signal },
        )
        const withStatus = tool.name === STATUS_TOOL && typeof result === 'object' && result !== null && !Array.isArray(result)
        // The output schema was checked against the worker's own; DSH validates the value again.
        return (withStatus ? { ...result, dsh_plugin: host.status() } : result) as never
      },
    }))
  }
}
