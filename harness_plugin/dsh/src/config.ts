/**
 * The plugin's configuration: strict (unknown keys and wrong types fail at load), with bounded
 * defaults. Exposed to Cordis as a Standard Schema validator, so a bad `cordis.yml` entry fails
 * before the plugin starts.
 * @module
 */

import { isAbsolute } from 'node:path'

/** The validated configuration. */
export interface PluginConfig {
  /** The worker's command, before `serve --config <configPath>`; e.g. `['/srv/venv/bin/artmem']`. */
  readonly command: readonly string[]
  /** Absolute path of artmem's TOML configuration. */
  readonly configPath: string
  /**
   * Name of the Honcho key's variable (a DSH credential reference): resolved through DSH's
   * credentials service when one is composed, else the environment; set in the worker's
   * environment only.
   */
  readonly honchoKeyEnv?: string
  /** Bound on one tool call or event, waiting for a ready worker included. */
  readonly requestTimeoutMs: number
  /** Bound on first-step recall; past it the step goes ahead without memory. */
  readonly recallTimeoutMs: number
  readonly handshakeTimeoutMs: number
  /** Bound on dispose: the worker's shutdown, outbox drain and exit. */
  readonly shutdownTimeoutMs: number
  readonly restartInitialMs: number
  readonly restartMaxMs: number
  /** Events forwarded but not yet acknowledged; past it events are dropped and counted. */
  readonly maxQueuedEvents: number
  /** Events larger than this (as JSON) are not forwarded, and counted. */
  readonly maxEventBytes: number
}

type Bounds = readonly [min: number, max: number, fallback: number]

const NUMBERS = {
  requestTimeoutMs: [1, 3_600_000, 120_000],
  recallTimeoutMs: [1, 60_000, 1500],
  handshakeTimeoutMs: [1, 600_000, 30_000],
  shutdownTimeoutMs: [1, 600_000, 20_000],
  restartInitialMs: [1, 600_000, 500],
  restartMaxMs: [1, 3_600_000, 30_000],
  maxQueuedEvents: [1, 1_000_000, 1000],
  maxEventBytes: [1, 16_777_216, 1_000_000],
} as const satisfies Record<string, Bounds>

const KEYS = new Set(['command', 'configPath', 'honchoKeyEnv', ...Object.keys(NUMBERS)])
const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/
/** What the worker inherits from the harness's environment, besides the Honcho key. */
const INHERITED_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TMPDIR', 'TZ'] as const

/** A configuration the plugin refuses. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

function fail(message: string): never {
  throw new ConfigError(`artmem plugin config: ${message}`)
}

function number(raw: Record<string, unknown>, key: keyof typeof NUMBERS): number {
  const [min, max, fallback] = NUMBERS[key]
  const value = raw[key]
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    fail(`${key} must be an integer from ${min} to ${max}`)
  }
  return value
}

/**
 * Validate a raw configuration.
 * @param raw - the `config` of the plugin's `cordis.yml` entry.
 * @returns the configuration with defaults filled in.
 * @throws ConfigError naming the first problem.
 */
export function parseConfig(raw: unknown): PluginConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('must be an object')
  const record = raw as Record<string, unknown>
  const unknown = Object.keys(record).filter(key => !KEYS.has(key))
  if (unknown.length > 0) fail(`unknown key(s) ${unknown.join(', ')}`)
  const { command, configPath, honchoKeyEnv } = record
  if (!Array.isArray(command) || command.length === 0
    || !command.every(part => typeof part === 'string' && part !== '' && !part.includes('\0'))) {
    fail('command must be a non-empty list of non-empty strings')
  }
  if (typeof configPath !== 'string' || !isAbsolute(configPath) || configPath.includes('\0')) {
    fail('configPath must be an absolute path')
  }
  if (honchoKeyEnv !== undefined && (typeof honchoKeyEnv !== 'string' || !ENV_NAME.test(honchoKeyEnv))) {
    fail('honchoKeyEnv must be an environment variable name ([A-Z_][A-Z0-9_]*)')
  }
  const config: PluginConfig = {
    command: [...command as string[]],
    configPath,
    ...honchoKeyEnv === undefined ? {} : { honchoKeyEnv },
    requestTimeoutMs: number(record, 'requestTimeoutMs'),
    recallTimeoutMs: number(record, 'recallTimeoutMs'),
    handshakeTimeoutMs: number(record, 'handshakeTimeoutMs'),
    shutdownTimeoutMs: number(record, 'shutdownTimeoutMs'),
    restartInitialMs: number(record, 'restartInitialMs'),
    restartMaxMs: number(record, 'restartMaxMs'),
    maxQueuedEvents: number(record, 'maxQueuedEvents'),
    maxEventBytes: number(record, 'maxEventBytes'),
  }
  if (config.restartMaxMs < config.restartInitialMs) fail('restartMaxMs must be at least restartInitialMs')
  return config
}

/**
 * The worker's command line.
 * @param config - validated configuration.
 * @returns argv for `artmem serve`.
 */
export function workerArgv(config: PluginConfig): string[] {
  return [...config.command, 'serve', '--config', config.configPath]
}

/**
 * The worker's environment: a few locale and path variables, plus the Honcho key under its own
 * name when it is set. Nothing else of the harness's environment reaches the worker.
 * @param config - validated configuration.
 * @param env - the harness's environment.
 * @returns the worker's environment.
 */
export function workerEnv(config: PluginConfig, env: NodeJS.ProcessEnv): Record<string, string> {
  const result: Record<string, string> = {}
  const names: string[] = [...INHERITED_ENV]
  if (config.honchoKeyEnv !== undefined) names.push(config.honchoKeyEnv)
  for (const name of names) {
    const value = env[name]
    if (value !== undefined) result[name] = value
  }
  return result
}

/** A Standard Schema (v1) validator, which Cordis applies to the entry's config before `apply`. */
export const ConfigSchema = {
  '~standard': {
    version: 1,
    vendor: 'artmem',
    validate(value: unknown): { value: PluginConfig } | { issues: { message: string }[] } {
      try {
        return { value: parseConfig(value) }
      } catch (error: unknown) {
        if (error instanceof ConfigError) return { issues: [{ message: error.message }] }
        throw error
      }
    },
  },
} as const
