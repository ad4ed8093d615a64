// What the gateway tests share: a gateway in this process (or the real CLI in another) in front
// of the engine stand-in, a plain HTTP client that speaks what an OpenAI client sends, the capture
// read back, and rollscope's own CLI run on the capture folder.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type GatewayConfigInput, GatewayConfig } from '../../server/gateway/config.ts';
import { CaptureLine } from '../../server/gateway/protocol.ts';
import { CheckReport } from '../../server/report/check-report.ts';
import type { Finding } from '../../server/model/finding.ts';
import { type RunningGateway, startGateway } from '../../server/gateway/server.ts';
import { type EngineStandin, type StandinOptions, startEngineStandin } from './engine-standin.ts';
import { encodeText, REFERENCE_IDS } from './engine-reference.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `rollscope-${prefix}-`));
}

export interface Rig {
  engine: EngineStandin;
  gateway: RunningGateway;
  out: string;
  url: string;
  close(): Promise<void>;
}

/** The stand-in and a gateway in front of it, in this process. */
export async function startRig(
  standin: Omit<StandinOptions, 'model'> & { model?: string },
  config: Partial<GatewayConfigInput> = {},
  clock: { now?: () => number } = {},
): Promise<Rig> {
  const engine = await startEngineStandin({ model: MODEL, ...standin });
  const out = config.out ?? tempDir('gw');
  const gateway = await startGateway(
    GatewayConfig.parse({ upstream: engine.url, out, port: 0, engine: standin.engine, ...config }),
    undefined,
    clock,
  );
  return {
    engine,
    gateway,
    out,
    url: gateway.url,
    async close() {
      await gateway.close();
      await engine.close();
    },
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  /** The JSON body, or the data of each server-sent event. */
  // biome-ignore lint/suspicious/noExplicitAny: the tests read answers field by field, as a client does
  json: any;
  events: string[];
}

/** POST a JSON body as an OpenAI client does (stream or not). */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer EMPTY', ...headers },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  const type = r.headers.get('content-type') ?? '';
  if (type.startsWith('text/event-stream')) {
    const events = text
      .split('\n\n')
      .map((e) => e.replace(/^data: /, ''))
      .filter((e) => e !== '');
    return { status: r.status, headers: r.headers, json: undefined, events };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: r.status, headers: r.headers, json, events: [] };
}

/** The assistant message of a chat answer's choice 0, streamed or not (deltas joined). */
export function assistantMessage(a: Answer): { content: string | null; tool_calls?: unknown[] } {
  if (a.events.length === 0) return a.json.choices[0].message;
  let content = '';
  const calls: { id?: string; type?: string; function: { name: string; arguments: string } }[] = [];
  for (const e of a.events) {
    if (e === '[DONE]') continue;
    const chunk = JSON.parse(e);
    // Choice 0: a streamed n > 1 answer interleaves its choices.
    for (const c of (chunk.choices ?? []).filter((c: { index?: number }) => (c.index ?? 0) === 0)) {
      content += c.delta?.content ?? '';
      for (const t of c.delta?.tool_calls ?? []) {
        const at = t.index ?? 0;
        calls[at] ??= { function: { name: '', arguments: '' } };
        if (t.id) calls[at].id = t.id;
        if (t.type) calls[at].type = t.type;
        calls[at].function.name += t.function?.name ?? '';
        calls[at].function.arguments += t.function?.arguments ?? '';
      }
    }
  }
  return {
    content: calls.length > 0 && content === '' ? null : content,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
}

/** A capture line's response as the vLLM importer reads it. */
export interface CapturedAnswer {
  prompt_token_ids?: number[] | null;
  choices: { prompt_token_ids?: number[] | null; token_ids?: number[] | null }[];
}

export const answerOf = (line: CaptureLine): CapturedAnswer => line.response as unknown as CapturedAnswer;

/** Every line of every capture file, in file then line order. */
export function readCapture(dir: string): CaptureLine[] {
  return captureFiles(dir).flatMap((f) =>
    fs
      .readFileSync(f, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => CaptureLine.parse(JSON.parse(l))),
  );
}

export function captureFiles(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => path.join(dir, f));
}

/** `rollscope ARGS` from the sources. */
export function rollscope(args: string[], opts: { env?: Record<string, string> } = {}) {
  return spawnSync(process.execPath, ['bin/rollscope.js', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 180_000,
    env: { ...process.env, NO_COLOR: '1', ROLLSCOPE_FROM_SOURCE: '1', ...opts.env },
  });
}

/** `check PATHS --json` parsed. */
/** `check --json` with its findings typed as the Finding model they are. */
export type CheckedRun = Omit<CheckReport, 'trajectories'> & {
  trajectories: (Omit<CheckReport['trajectories'][number], 'findings'> & { findings: Finding[] })[];
};

export function checkJson(paths: string[]): { status: number | null; report: CheckedRun } {
  const r = rollscope(['check', ...paths, '--json', '--workers', '0']);
  if (!r.stdout) throw new Error(`check printed nothing: ${r.stderr}`);
  return { status: r.status, report: CheckReport.parse(JSON.parse(r.stdout)) as CheckedRun };
}

/** The real `rollscope gateway` in its own process; resolves once it prints its address. */
export async function spawnGateway(
  args: string[],
): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(process.execPath, ['bin/rollscope.js', 'gateway', ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', ROLLSCOPE_FROM_SOURCE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${err}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}: ${err}`));
    });
  });
  return { child, url, stderr: () => err };
}

/** Wait for a child to exit; its status. */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/**
 * What the engine itself renders for a chat request (its template, its tokenizer), asked directly:
 * the request's prompt ids, its sampling limits, stream and choices left out.
 */
export async function engineRender(engine: EngineStandin, body: Record<string, unknown>): Promise<number[]> {
  const { stream: _s, stream_options: _o, n: _n, max_tokens: _m, stop: _t, min_tokens: _k, ...rest } = body;
  const res = await post(`${engine.url}/v1/chat/completions`, { ...rest, max_tokens: 1, return_token_ids: true });
  if (res.status !== 200) throw new Error(`engine render: ${JSON.stringify(res.json)}`);
  return res.json.prompt_token_ids;
}

const ASSISTANT = (await encodeText('qwen2.5-vl', 'assistant'))[0]!;

/** Ids after the close of the last assistant turn before the generation prompt (what a continued turn adds). */
export function afterLastAnswer(ids: readonly number[]): number[] {
  let open = -1;
  for (let i = ids.length - 1, seen = 0; i >= 0; i--)
    if (ids[i] === REFERENCE_IDS.imStart && ids[i + 1] === ASSISTANT && ++seen === 2) {
      open = i;
      break;
    }
  return ids.slice(ids.indexOf(REFERENCE_IDS.imEnd, open) + 1);
}
