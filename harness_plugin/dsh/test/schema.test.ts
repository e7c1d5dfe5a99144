/** Projection of the worker's JSON Schemas onto DSH's schema DSL: only ever looser, always accepted. */

import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { defineTool, validateArgs, validateJsonSchemaValue, valueSchemaSpecToJsonSchema } from '@deepseek-ai/dsh-tools'
import { toParameters, toValueSchema } from '../src/schema.ts'
import { outputSchema, parseToolList } from '../src/tools.ts'
import { WorkerClient } from '../src/worker.ts'

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
const ARTMEM = process.env['ARTMEM_BIN'] ?? join(REPO, '.venv/bin/artmem')

describe('schema projection', () => {
  it('keeps types, required, closed objects and literals; drops value bounds', () => {
    const parameters = toParameters({
      type: 'object',
      additionalProperties: false,
      required: ['query'],
      properties: {
        query: { type: 'string', minLength: 1, maxLength: 1000, pattern: '^x', description: 'what to find' },
        limit: { type: 'integer', minimum: 1, maximum: 20, default: 10 },
        kind: { const: 'experiment-card', type: 'string' },
        mode: { enum: ['a', 'b'] },
        where: { type: 'object', additionalProperties: false, properties: { k: { type: 'boolean' } } },
        labels: { type: 'object', additionalProperties: { type: 'integer' } },
      },
    })
    assert.deepEqual(parameters, {
      query: { type: 'string', description: 'what to find', required: true },
      limit: { type: 'integer', default: 10 },
      kind: { type: 'string', const: 'experiment-card' },
      mode: { type: 'string', enum: ['a', 'b'] },
      where: { type: 'object', additionalProperties: false, properties: { k: { type: 'boolean' } } },
      labels: { type: 'object', additionalProperties: true },
    })
  })

  it('inlines $defs, turns a disjoint anyOf into oneOf, and an overlapping one into JSON', () => {
    const schema = {
      $defs: { State: { type: 'string', enum: ['pending', 'indexed'] } },
      type: 'object',
      properties: {
        state: { $ref: '#/$defs/State', description: 'index state' },
        shape: { anyOf: [{ type: 'array', items: { type: 'integer' } }, { type: 'null' }], default: null },
        number: { anyOf: [{ type: 'integer' }, { type: 'number' }] },
        loop: { $ref: '#/$defs/Missing' },
      },
    }
    assert.deepEqual(toValueSchema(schema), {
      type: 'object',
      additionalProperties: true,
      properties: {
        state: { type: 'string', enum: ['pending', 'indexed'], description: 'index state' },
        shape: { oneOf: [{ type: 'array', items: { type: 'integer' } }, { type: 'null' }], default: null },
        number: { type: 'json' },
        loop: { type: 'json' },
      },
    })
  })

  it('rejects tool parameters that are not an object schema', () => {
    assert.throws(() => toParameters({ type: 'string' }), /object schema/)
  })

  it("accepts every tool of the real worker, and the worker's own valid arguments", async () => {
    const root = mkdtempSync(join(tmpdir(), 'artmem-dsh-schema-'))
    mkdirSync(join(root, 'work'))
    writeFileSync(join(root, 'artmem.toml'), [
      `artifact_root = "${root}/artifacts"`, `rlm_root = "${root}/rlm"`, `state_root = "${root}/state"`,
      '[[projects]]', 'id = "p"', `root = "${root}/work"`, '[tools]', 'artifact_memory = true', '',
    ].join('\n'))
    const worker = new WorkerClient({
      argv: [ARTMEM, 'serve', '--config', join(root, 'artmem.toml')],
      env: () => ({ PATH: process.env['PATH'] ?? '' }),
      handshakeTimeoutMs: 30_000,
      shutdownTimeoutMs: 30_000,
      restartInitialMs: 1000,
      restartMaxMs: 1000,
      log: () => undefined,
    })
    try {
      await worker.start()
      const tools = parseToolList(await worker.request('tools/list', {}, { timeoutMs: 30_000 }))
      assert.ok(tools.some(tool => tool.name === 'memory_artifact_record'))
      for (const tool of tools) {
        const parameters = toParameters(tool.parameters)
        const output = toValueSchema(tool.output)
        defineTool({ name: tool.name, description: tool.description, parameters, output: { schema: output, render: () => [] }, execute: async () => null as never })
      }
      const caller = { session_id: 's1', cwd: join(root, 'work'), call_id: 'c', root_call_id: 'c', agent_kind: 'root' } as const
      for (const [name, args] of [['memory_search', { query: 'cohort' }], ['memory_status', {}]] as const) {
        const value = await worker.request('tools/call', { name, arguments: args }, { caller, timeoutMs: 30_000 })
        const output = toValueSchema(tools.find(tool => tool.name === name)?.output)
        assert.deepEqual(validateJsonSchemaValue(valueSchemaSpecToJsonSchema(output), value, ''), [], name)
      }
      // memory_status's result as the plugin returns it, with its own status added.
      const status = tools.find(tool => tool.name === 'memory_status')
      assert.ok(status !== undefined)
      const value = await worker.request('tools/call', { name: 'memory_status', arguments: {} }, { caller, timeoutMs: 30_000 })
      const closed = valueSchemaSpecToJsonSchema(toValueSchema(status.output))
      const withPlugin = { ...(value as object), dsh_plugin: { worker: { state: 'ready' } } }
      assert.notDeepEqual(validateJsonSchemaValue(closed, withPlugin, ''), [])
      assert.deepEqual(validateJsonSchemaValue(valueSchemaSpecToJsonSchema(outputSchema(status)), withPlugin, ''), [])
      const record = tools.find(tool => tool.name === 'memory_artifact_record')
      const args = {
        source_path: 'r.csv', title: 'Cohort table', summary: 'Per cohort.', query_fingerprint: 'a'.repeat(64),
        source: 'warehouse', source_version: 'v1', shape: [2, 3], columns: ['cohort'], tags: ['t'],
      }
      assert.deepEqual(validateArgs(toParameters(record?.parameters), args), [])
      assert.notDeepEqual(validateArgs(toParameters(record?.parameters), { ...args, shape: 'wide' }), [])
    } finally {
      await worker.close()
      rmSync(root, { recursive: true, force: true })
    }
  })
})
