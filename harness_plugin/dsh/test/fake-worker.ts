/**
 * A scriptable stand-in for `artmem serve`, for the supervisor's unit tests. Run with plain
 * `node` (type stripping). `argv[2]` picks a mode: `normal`, `bad-protocol`, `exit-after-hello`,
 * `ignore-eof`. A `tools/call` acts by its tool name:
 *   echo     reply with the arguments, caller, pid, received request count and env names
 *   fail     reply with a worker error (`cas.path_escape`)
 *   crash    SIGKILL itself, leaving the request unanswered
 *   hang     never reply
 *   hold     reply only after answering the next request (out of order)
 *   garbage  write a line that is not JSON, then the reply
 *   bad      reply with `ok: "yes"` (a malformed reply carrying the request's id)
 * Every op received is also logged on stderr as `op <name>`; the env var FAKE_HIDDEN, when set,
 * is written to stderr at start.
 */

import { createInterface } from 'node:readline'

const mode = process.argv[2] ?? 'normal'
let received = 0
let held: (() => void) | undefined

function send(value: object): void {
  process.stdout.write(`${JSON.stringify({ v: 1, ...value })}\n`)
}

function ok(id: unknown, result: unknown): void {
  send({ id, ok: true, result })
}

function toolCall(id: unknown, name: unknown, args: unknown, caller: unknown): void {
  switch (name) {
    case 'echo':
      return ok(id, { arguments: args, caller, pid: process.pid, received, env: Object.keys(process.env).sort() })
    case 'fail':
      return send({ id, ok: false, error: { code: 'cas.path_escape', message: 'outside exports/', retryable: false } })
    case 'crash':
      process.kill(process.pid, 'SIGKILL')
      return
    case 'hang':
      return
    case 'hold':
      held = () => ok(id, { held: true })
      return
    case 'garbage':
      process.stdout.write('this is not a reply\n')
      return ok(id, { after: 'garbage' })
    case 'bad':
      return send({ id, ok: 'yes' })
    default:
      return send({ id, ok: false, error: { code: 'input.unknown_tool', message: 'no such tool', retryable: false } })
  }
}

if (process.env['FAKE_HIDDEN'] !== undefined) process.stderr.write(`starting with ${process.env['FAKE_HIDDEN']}\n`)

const input = createInterface({ input: process.stdin, crlfDelay: Infinity })
input.on('line', (line) => {
  const request = JSON.parse(line) as { id: unknown; op: string; caller: unknown; params: Record<string, unknown> }
  received += 1
  process.stderr.write(`op ${request.op}\n`)
  const release = held
  held = undefined
  switch (request.op) {
    case 'hello':
      ok(request.id, { protocol: mode === 'bad-protocol' ? 2 : 1, name: 'artmem', version: '0.0.0-fake', ops: ['hello', 'tools/list', 'tools/call', 'events/append', 'recall/first-step', 'status', 'shutdown'] })
      if (mode === 'exit-after-hello') process.exit(1)
      break
    case 'tools/call':
      toolCall(request.id, request.params['name'], request.params['arguments'], request.caller)
      break
    case 'shutdown':
      ok(request.id, { stopping: true })
      break
    default:
      ok(request.id, { op: request.op })
  }
  release?.()
})
input.on('close', () => {
  if (mode !== 'ignore-eof') process.exit(0)
  setInterval(() => undefined, 60_000) // stay alive with no input, as a stuck worker would
})
