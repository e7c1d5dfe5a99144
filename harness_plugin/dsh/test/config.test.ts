/** The plugin's configuration: strict keys and types, defaults, the worker's argv and environment. */

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError, ConfigSchema, parseConfig, workerArgv, workerEnv } from '../src/config.ts'

const MINIMAL = { command: ['/venv/bin/artmem'], configPath: '/etc/artmem.toml' }

describe('plugin config', () => {
  it('fills bounded defaults and builds the worker command line', () => {
    const config = parseConfig(MINIMAL)
    assert.equal(config.recallTimeoutMs, 1500)
    assert.equal(config.maxQueuedEvents, 1000)
    assert.deepEqual(workerArgv(config), ['/venv/bin/artmem', 'serve', '--config', '/etc/artmem.toml'])
  })

  it('rejects unknown keys, wrong types and out-of-range values', () => {
    const bad: [object, RegExp][] = [
      [{ ...MINIMAL, comand: ['x'] }, /unknown key\(s\) comand/],
      [{ ...MINIMAL, command: [] }, /command must be/],
      [{ ...MINIMAL, command: 'artmem' }, /command must be/],
      [{ ...MINIMAL, configPath: 'artmem.toml' }, /configPath must be an absolute path/],
      [{ ...MINIMAL, honchoKeyEnv: 'honcho key' }, /honchoKeyEnv/],
      [{ ...MINIMAL, recallTimeoutMs: '1500' }, /recallTimeoutMs must be an integer/],
      [{ ...MINIMAL, maxQueuedEvents: 0 }, /maxQueuedEvents must be an integer from 1/],
      [{ ...MINIMAL, restartInitialMs: 10, restartMaxMs: 5 }, /restartMaxMs must be at least/],
      [[], /must be an object/],
    ]
    for (const [raw, message] of bad) assert.throws(() => parseConfig(raw), (e: unknown) => e instanceof ConfigError && message.test(e.message))
  })

  it('reports problems to Cordis as Standard Schema issues', () => {
    const result = ConfigSchema['~standard'].validate({ ...MINIMAL, extra: 1 })
    assert.ok('issues' in result && /unknown key/.test(result.issues[0]?.message ?? ''))
    assert.ok('value' in ConfigSchema['~standard'].validate(MINIMAL))
  })

  it('gives the worker a few locale and path variables and the Honcho key, nothing else', () => {
    const config = parseConfig({ ...MINIMAL, honchoKeyEnv: 'MY_HONCHO' })
    const env = workerEnv(config, { PATH: '/bin', LANG: 'C.UTF-8', MY_HONCHO: 'k-1', DEEPSEEK_API_KEY_NAME: 'x', OTHER: 'y' })
    assert.deepEqual(env, { PATH: '/bin', LANG: 'C.UTF-8', MY_HONCHO: 'k-1' })
    assert.deepEqual(workerEnv(parseConfig(MINIMAL), { PATH: '/bin', MY_HONCHO: 'k-1' }), { PATH: '/bin' })
  })
})
