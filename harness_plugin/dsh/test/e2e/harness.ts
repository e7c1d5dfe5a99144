/**
 * What the end-to-end tests drive: DSH's own headless driver over a composition of DSH's
 * headless example (its model disabled), the scripted model and this plugin; a real
 * `artmem serve` behind the plugin; and the HTTP fake of Honcho in a Python helper.
 */

import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { Step } from './scripted-model.ts'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '../../../..')
export const PLUGIN = resolve(HERE, '../../src/index.ts')
export const ARTMEM = process.env['ARTMEM_BIN'] ?? join(REPO, '.venv/bin/artmem')
const PYTHON = process.env['ARTMEM_PYTHON'] ?? join(REPO, '.venv/bin/python')
const DSH_ROOT = process.env['DSH_ROOT'] ?? ''
const TSX = join(DSH_ROOT, 'node_modules/tsx/dist/esm/index.mjs')
const DRIVER = join(DSH_ROOT, 'examples/headless-agent/tests/fixtures/headless-driver.ts')
/** The environment variable the plugin passes to the worker, named by both configurations. */
export const KEY_ENV = 'ARTMEM_E2E_HONCHO_KEY'
export const USER_PEER = 'alice'
export const ASSISTANT_PEER = 'artmem-assistant'

/** A finished process. */
export interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Run a command to completion.
 * @param argv - the command.
 * @param options - working directory and environment.
 * @returns exit code and output.
 */
export function run(argv: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Finished> {
  const [command, ...args] = argv
  const child = spawn(command ?? '', args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  return new Promise((done, fail) => {
    child.on('error', fail)
    child.on('close', code => done({ code, stdout, stderr }))
  })
}

/** One DSH session event, as the headless driver prints it. */
export interface SessionEvent {
  readonly type: string
  readonly seq: number
  readonly data: Record<string, unknown> & {
    readonly turn?: number
    readonly step?: number
    readonly source?: { readonly kind: string; readonly plugin?: string }
    readonly content?: readonly { readonly type: string; readonly text?: string }[]
    readonly message?: { readonly content: readonly ToolResultBlock[] }
    readonly reason?: { readonly kind: string }
  }
}

interface ToolResultBlock {
  readonly type: string
  readonly toolCallId?: string
  readonly isError?: boolean
  readonly content?: readonly { readonly type: string; readonly text?: string }[]
}

/** One tool result the model saw. */
export interface ToolResult {
  readonly callId: string
  readonly isError: boolean
  readonly text: string
  /** The text as JSON, when it is. */
  readonly value: unknown
}

/** A finished headless session. */
export interface Session {
  readonly id: string
  readonly events: readonly SessionEvent[]
  readonly output: string
  readonly stdout: string
  readonly stderr: string
}

/**
 * The tool results of a session, in order.
 * @param session - the session.
 * @returns every `tool/result`.
 */
export function toolResults(session: Session): ToolResult[] {
  return session.events.filter(event => event.type === 'tool/result').map((event) => {
    const block = event.data.message?.content[0]
    const text = (block?.content ?? []).map(part => part.text ?? '').join('')
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      value = undefined
    }
    return { callId: block?.toolCallId ?? '', isError: block?.isError === true, text, value }
  })
}

/**
 * The text of the session's `user/message` events from `source`.
 * @param session - the session.
 * @param kind - `user`, or `plugin`.
 * @returns one text per message.
 */
export function userMessages(session: Session, kind: 'user' | 'plugin'): { seq: number; text: string; plugin?: string }[] {
  return session.events
    .filter(event => event.type === 'user/message' && event.data.source?.kind === kind)
    .map(event => ({
      seq: event.seq,
      text: (event.data.content ?? []).map(part => part.text ?? '').join(''),
      ...event.data.source?.plugin === undefined ? {} : { plugin: event.data.source.plugin },
    }))
}

/** Where one end-to-end run lives. */
export interface Layout {
  readonly root: string
  readonly artmemConfig: string
  readonly rlmRoot: string
  readonly artifactRoot: string
  readonly projects: { readonly trial: string; readonly other: string }
}

/** One headless session to run. */
/**
 * A fresh directory tree for one run: two projects, the RLM, artifact and state roots.
 * @returns where everything lives.
 */
export function layout(): Layout {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'artmem-dsh-e2e-')))
  const projects = { trial: join(root, 'work', 'trial'), other: join(root, 'work', 'other') }
  mkdirSync(projects.trial, { recursive: true })
  mkdirSync(projects.other, { recursive: true })
  return {
    root,
    projects,
    artmemConfig: join(root, 'artmem.toml'),
    rlmRoot: join(root, 'rlm'),
    artifactRoot: join(root, 'artifacts'),
  }
}

/**
 * The artmem configuration of a run: both projects, artifact memory, Honcho, capture and recall.
 * @param where - the run's directories.
 * @param baseUrl - the Honcho to use.
 * @param workspace - its workspace (created if missing).
 * @returns the TOML text.
 */
export function artmemToml(where: Layout, baseUrl: string, workspace: string): string {
  const lines = [
    `artifact_root = "${where.artifactRoot}"`,
    `rlm_root = "${where.rlmRoot}"`,
    `state_root = "${join(where.root, 'state')}"`,
    '[[projects]]', 'id = "trial-analysis"', `root = "${where.projects.trial}"`,
    '[[projects]]', 'id = "other-project"', `root = "${where.projects.other}"`,
    '[tools]', 'artifact_memory = true',
  ]
  lines.push('[honcho]', 'enabled = true', `base_url = "${baseUrl}"`, `workspace_id = "${workspace}"`,
    `user_peer_id = "${USER_PEER}"`, `assistant_peer_id = "${ASSISTANT_PEER}"`, `api_key_env = "${KEY_ENV}"`,
    'create_workspace = true', 'timeout_s = 5')
  lines.push('[capture]', 'mode = "completed-root-turns"', '[recall]', 'mode = "first-root-step"')
  return `${lines.join('\n')}\n`
}

export interface SessionPlan {
  readonly project: 'trial' | 'other'
  readonly task: string
  readonly steps: readonly Step[]
  readonly export?: { readonly name: string; readonly content: string }
  /** The worker command before `serve --config`; the real `artmem` by default. */
  readonly command?: readonly string[]
}

let compositions = 0

/**
 * Boot DSH headless with the plugin, run one task in a new session, and wait for the driver
 * to finish (it disposes the plugin, which shuts the worker down).
 * @param layout - the run's directories and artmem configuration.
 * @param plan - the session.
 * @param env - extra environment (the Honcho key).
 * @returns the session's events and output.
 */
export async function runSession(layout: Layout, plan: SessionPlan, env: Record<string, string>): Promise<Session> {
  compositions += 1
  const cwd = layout.projects[plan.project]
  const composition = join(layout.root, `session-${compositions}.cordis.yml`)
  const dshHome = join(layout.root, 'dsh-home')
  const agentsHome = join(layout.root, 'agents-home')
  const entries = [
    {
      id: 'scripted-model',
      name: join(HERE, 'scripted-model.ts'),
      config: { steps: plan.steps, ...plan.export === undefined ? {} : { export: { rlmRoot: layout.rlmRoot, ...plan.export } } },
    },
    {
      id: 'base',
      name: '@deepseek-ai/cordis-plugin-include',
      config: {
        path: join(DSH_ROOT, 'examples/headless-agent/cordis.yml'),
        patches: [
          { id: 'llm-deepseek', name: '@deepseek-ai/dsh-llm-deepseek', disabled: true },
          {
            id: 'agent-spine',
            name: '@deepseek-ai/dsh-agent-spine-demo',
            config: {
              agents: [{ id: 'main', provider: 'scripted', model: 'scripted', cwd }],
              workspaceContext: false,
              dshHome,
              skills: { filesystem: { agentsHome } },
              persona: 'artmem end-to-end test agent.',
            },
          },
          { id: 'persistence', name: '@deepseek-ai/dsh-session-persistence-jsonl', config: { root: join(layout.root, 'sessions') } },
        ],
      },
    },
    {
      id: 'artmem',
      name: PLUGIN,
      config: { command: plan.command ?? [ARTMEM], configPath: layout.artmemConfig, honchoKeyEnv: KEY_ENV, recallTimeoutMs: 10_000 },
    },
  ]
  writeFileSync(composition, JSON.stringify(entries, null, 1)) // JSON is YAML
  const finished = await run([process.execPath, '--import', TSX, DRIVER, composition, plan.task], {
    cwd,
    env: { ...process.env, ...env, DSH_HOME: dshHome, DSH_AGENTS_HOME: agentsHome },
  })
  if (finished.code !== 0) throw new Error(`the headless driver failed (${finished.code}):\n${finished.stderr}`)
  const lines = finished.stdout.split('\n').filter(line => line.trim() !== '').map(line => JSON.parse(line) as {
    type: string
    sessionId: string
    output?: string
    event?: SessionEvent
  })
  const result = lines.find(line => line.type === 'result')
  if (result === undefined) throw new Error(`no result from the headless driver:\n${finished.stdout}`)
  return {
    id: result.sessionId,
    events: lines.flatMap(line => (line.event === undefined ? [] : [line.event])),
    output: result.output ?? '',
    stdout: finished.stdout,
    stderr: finished.stderr,
  }
}

/** A message the fake Honcho holds. */
export interface HonchoMessage {
  readonly content: string
  readonly peer_id: string
  readonly session_id: string
  readonly metadata: Record<string, unknown>
}

/** The HTTP fake of Honcho, served by `fake_honcho_server.py` with the repository's Python. */
export class FakeHonchoServer {
  readonly #child: ReturnType<typeof spawn>
  readonly #lines: AsyncIterator<string>
  readonly #exited: Promise<void>

  private constructor(child: ReturnType<typeof spawn>) {
    this.#child = child
    if (child.stdout === null) throw new Error('no stdout')
    this.#lines = createInterface({ input: child.stdout, crlfDelay: Infinity })[Symbol.asyncIterator]()
    this.#exited = new Promise(done => child.on('close', () => done()))
  }

  /**
   * Start the fake.
   * @param key - the API key it accepts.
   * @returns the running fake and its base URL.
   */
  static async start(key: string): Promise<{ server: FakeHonchoServer; baseUrl: string }> {
    const child = spawn(PYTHON, [join(HERE, 'fake_honcho_server.py')], {
      env: { ...process.env, [KEY_ENV]: key },
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const server = new FakeHonchoServer(child)
    const first = await server.#lines.next()
    if (first.done === true) throw new Error('the fake Honcho server did not start')
    return { server, baseUrl: (JSON.parse(first.value) as { base_url: string }).base_url }
  }

  /**
   * Every message of a workspace, in insertion order.
   * @param workspace - the workspace id.
   * @returns the messages.
   */
  async messages(workspace: string): Promise<HonchoMessage[]> {
    this.#child.stdin?.write(`${JSON.stringify({ messages: workspace })}\n`)
    const line = await this.#lines.next()
    if (line.done === true) throw new Error('the fake Honcho server stopped')
    return JSON.parse(line.value) as HonchoMessage[]
  }

  /** Stop the server. */
  async stop(): Promise<void> {
    this.#child.stdin?.end()
    await this.#exited
  }
}

/**
 * The Honcho session of a DSH session (ARCHITECTURE.md, Identities): `dsh_` + base32url(sha256(session id)).
 * @param sessionId - the DSH session id.
 * @returns the Honcho session id.
 */
export function honchoSession(sessionId: string): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567'
  let bits = 0
  let value = 0
  let out = ''
  for (const byte of createHash('sha256').update(sessionId, 'utf8').digest()) {
    value = ((value << 8) | byte) & 0xffff
    bits += 8
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  return `dsh_${out}${bits > 0 ? alphabet[(value << (5 - bits)) & 31] : ''}`
}
