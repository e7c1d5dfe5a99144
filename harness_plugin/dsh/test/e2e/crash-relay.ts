/**
 * Runs the worker command in `argv` behind a line relay that, on a `tools/call` whose params
 * contain `artmem-e2e-crash`, SIGKILLs the worker and then itself: the worker dies with that
 * call in flight, deterministically (events quoting the marker pass through). Replies and logs go straight from the worker to the plugin. Run
 * with plain `node` (type stripping).
 */

import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'

const MARKER = 'artmem-e2e-crash'
const [command, ...args] = process.argv.slice(2)
if (command === undefined) throw new Error('usage: crash-relay.ts COMMAND [ARG...]')
const worker = spawn(command, args, { stdio: ['pipe', 'inherit', 'inherit'] })
worker.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on('line', (line) => {
    const request = JSON.parse(line) as { op?: unknown; params?: unknown }
    if (request.op === 'tools/call' && JSON.stringify(request.params).includes(MARKER)) {
      worker.kill('SIGKILL')
      process.kill(process.pid, 'SIGKILL')
    }
    worker.stdin.write(`${line}\n`)
  })
  .on('close', () => worker.stdin.end())
