/**
 * The worker's JSON Schemas (pydantic's draft 2020-12) projected onto DSH's value-schema DSL,
 * which enforces a smaller subset: one `type`, `properties`/`required`/boolean
 * `additionalProperties`, `items`, scalar `enum`/`const`, exact-one `oneOf`, annotations.
 *
 * `$ref`s into `$defs` are inlined; `anyOf` becomes `oneOf` when its branches cannot overlap
 * (distinct types), else unconstrained JSON; value bounds (`pattern`, `maxLength`, `minimum`, ...)
 * are dropped. The projection only ever loosens, so DSH never rejects what the worker accepts:
 * the worker validates every argument itself and stays the authority.
 * @module
 */

import type { JsonValue } from '@deepseek-ai/dsh-session'
import type { ParameterPropertySpec, ParameterSchemaSpec, ValueSchemaSpec } from '@deepseek-ai/dsh-tools'

type Json = Record<string, unknown>
type Annotations = { description?: string; title?: string; default?: JsonValue; examples?: JsonValue }

/** Past this nesting (or a `$ref` cycle), a node is unconstrained JSON. */
const MAX_DEPTH = 32
const SCALARS = new Set(['string', 'number', 'integer', 'boolean', 'null'])

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isJson(value: unknown, depth = 0): value is JsonValue {
  if (depth > MAX_DEPTH) return false
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true
  if (typeof value === 'number') return Number.isFinite(value) && !Object.is(value, -0)
  if (Array.isArray(value)) return value.every(item => isJson(item, depth + 1))
  return isRecord(value) && Object.values(value).every(item => isJson(item, depth + 1))
}

function annotations(node: Json): Annotations {
  const result: Annotations = {}
  if (typeof node['description'] === 'string') result.description = node['description']
  if (typeof node['title'] === 'string') result.title = node['title']
  if ('default' in node && isJson(node['default'])) result.default = node['default']
  if ('examples' in node && isJson(node['examples'])) result.examples = node['examples']
  return result
}

function matchesType(type: string, value: unknown): boolean {
  switch (type) {
    case 'string': return typeof value === 'string'
    case 'number': return typeof value === 'number' && Number.isFinite(value)
    case 'integer': return typeof value === 'number' && Number.isSafeInteger(value)
    case 'boolean': return typeof value === 'boolean'
    default: return value === null
  }
}

/** The scalar type all of `values` share, if any. */
function sharedType(values: readonly unknown[]): string | undefined {
  return ['string', 'integer', 'number', 'boolean', 'null'].find(type => values.every(value => matchesType(type, value)))
}

class Projector {
  readonly #defs: Json

  constructor(root: Json) {
    this.#defs = isRecord(root['$defs']) ? root['$defs'] : {}
  }

  value(node: unknown, depth: number): ValueSchemaSpec {
    if (!isRecord(node) || depth > MAX_DEPTH) return { type: 'json' }
    const ref = node['$ref']
    if (typeof ref === 'string') {
      const target = ref.startsWith('#/$defs/') ? this.#defs[ref.slice('#/$defs/'.length)] : undefined
      if (!isRecord(target)) return { type: 'json', ...annotations(node) }
      return this.value({ ...target, ...annotations(node) }, depth + 1)
    }
    const allOf = node['allOf']
    if (Array.isArray(allOf) && allOf.length === 1 && isRecord(allOf[0])) {
      return this.value({ ...allOf[0], ...annotations(node) }, depth + 1)
    }
    const branches = node['anyOf'] ?? node['oneOf']
    if (Array.isArray(branches)) return this.#union(branches, node, depth)
    const type = node['type']
    if (Array.isArray(type)) return this.#union(type.map(t => ({ type: t })), node, depth)
    return this.#typed(node, typeof type === 'string' ? type : this.#inferType(node), depth)
  }

  parameters(node: Json, depth: number): ParameterSchemaSpec {
    const properties = isRecord(node['properties']) ? node['properties'] : {}
    const required = new Set(Array.isArray(node['required']) ? node['required'] : [])
    return Object.fromEntries(Object.entries(properties).map(([key, child]) => {
      const spec: ParameterPropertySpec = required.has(key)
        ? { ...this.value(child, depth + 1), required: true }
        : this.value(child, depth + 1)
      return [key, spec]
    })) as ParameterSchemaSpec
  }

  #inferType(node: Json): string | undefined {
    if (Array.isArray(node['enum'])) return sharedType(node['enum'])
    if ('const' in node) return sharedType([node['const']])
    if (isRecord(node['properties'])) return 'object'
    return undefined
  }

  #typed(node: Json, type: string | undefined, depth: number): ValueSchemaSpec {
    const notes = annotations(node)
    if (type === 'object') {
      const open = node['additionalProperties'] !== false
      return isRecord(node['properties'])
        ? { type: 'object', additionalProperties: open, properties: this.parameters(node, depth), ...notes }
        : { type: 'object', additionalProperties: open, ...notes }
    }
    if (type === 'array') {
      return 'items' in node && isRecord(node['items'])
        ? { type: 'array', items: this.value(node['items'], depth + 1), ...notes }
        : { type: 'array', ...notes }
    }
    if (type === undefined || !SCALARS.has(type)) return { type: 'json', ...notes }
    const literal: { enum?: unknown[]; const?: unknown } = {}
    const values = node['enum']
    if (Array.isArray(values) && values.length > 0 && values.every(v => matchesType(type, v))) literal.enum = values
    if ('const' in node && matchesType(type, node['const'])) literal.const = node['const']
    return { type, ...literal, ...notes } as ValueSchemaSpec
  }

  /** Exact-one `oneOf` when the branches have distinct types; unconstrained JSON otherwise. */
  #union(branches: unknown[], node: Json, depth: number): ValueSchemaSpec {
    const notes = annotations(node)
    const projected = branches.map(branch => this.value(branch, depth + 1))
    const types = projected.map(spec => ('type' in spec ? spec.type : 'oneOf'))
    const overlapping = types.includes('json') || types.includes('oneOf')
      || new Set(types).size !== types.length || (types.includes('integer') && types.includes('number'))
    const [first, second, ...rest] = projected
    if (overlapping || first === undefined) return { type: 'json', ...notes }
    if (second === undefined) return { ...first, ...notes } as ValueSchemaSpec
    return { oneOf: [first, second, ...rest], ...notes }
  }
}

/**
 * A worker tool's `parameters` as DSH's parameter map.
 * @param schema - an object schema.
 * @returns the parameter map (required properties marked `required: true`).
 * @throws Error when the schema is not an object schema.
 */
export function toParameters(schema: unknown): ParameterSchemaSpec {
  if (!isRecord(schema) || schema['type'] !== 'object') throw new Error('tool parameters must be an object schema')
  return new Projector(schema).parameters(schema, 0)
}

/**
 * A worker tool's `output` schema as a DSH value schema.
 * @param schema - any JSON Schema.
 * @returns its projection (unconstrained JSON when there is nothing to keep).
 */
export function toValueSchema(schema: unknown): ValueSchemaSpec {
  return isRecord(schema) ? new Projector(schema).value(schema, 0) : { type: 'json' }
}
