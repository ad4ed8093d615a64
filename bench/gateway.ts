// Figure "gateway": the gateway's own time per call (reading the request, sessions, checks,
// rendering and tokenizing the new part, writing the capture; the engine excluded), p50 and p99,
// at 1, 16 and 64 concurrent sessions with ~2k- and ~16k-token histories and an image per session,
// in each mode; the gateway process's RSS; how much text it tokenized against how much history it
// saw. The gateway is the real CLI (`rollscope gateway`) as a child process; its own time per call
// is what it writes in each capture line (`gateway.ms.gateway`: arrival to answer, minus the wait
// for the engine). The engine is an instant stand-in in another process (`--instant-engine`): it
// answers each call at once, with the ids vLLM would return (the first prompt rendered with the
// profile and the image's pads, each later prompt the previous one ⧺ the generated ids ⧺ the new
// turn), so the checks run on realistic ids and find nothing.
// `node bin/tsx.js bench/gateway.ts [--quick] [--keep]`
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { padCountExpansions, renderTokens, renderText } from '../server/analysis/render.ts';
import { imageTokens } from '../server/families/qwen/image-math.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import type { Message } from '../server/model/trajectory.ts';
import {
  benchDir,
  isMain,
  REPO,
  round,
  ROLLSCOPE,
  runStandalone,
  type Figure,
  type Measure,
  type Target,
} from './lib.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';
const ANSWER = 'I will look at the figure again and measure the next side.';
const NEXT = 'Go on.';

// --- the instant engine (a child process) -----------------------------------------------------------

async function instantEngine(): Promise<void> {
  const profile = loadProfile('qwen2.5-vl');
  const answerIds = [...(await profile.tokenizer.encode(ANSWER)), qwenNamed(profile.ids).imEnd];
  const nextTurn = await profile.tokenizer.encode(`<|im_start|>user\n${NEXT}<|im_end|>\n<|im_start|>assistant\n`);
  const sessions = new Map<string, number[]>();
  const sizes = new Map<string, number>();
  const padCount = async (url: string) => {
    let n = sizes.get(url);
    if (n === undefined) {
      const meta = await sharp(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64')).metadata();
      n = imageTokens(meta.width!, meta.height!, profile.vision).padCount;
      sizes.set(url, n);
    }
    return n;
  };
  const answer = (promptIds: number[], chat: boolean) => {
    const logprobs = answerIds.map((_, i) => -0.01 * (i + 1));
    const usage = {
      prompt_tokens: promptIds.length,
      completion_tokens: answerIds.length,
      total_tokens: promptIds.length + answerIds.length,
    };
    return chat
      ? {
          id: 'chatcmpl-instant',
          object: 'chat.completion',
          created: 0,
          model: MODEL,
          prompt_token_ids: promptIds,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: ANSWER, tool_calls: [] },
              logprobs: { content: logprobs.map((logprob) => ({ token: 'x', logprob, top_logprobs: [] })) },
              finish_reason: 'stop',
              stop_reason: null,
              token_ids: answerIds,
            },
          ],
          usage,
        }
      : {
          id: 'cmpl-instant',
          object: 'text_completion',
          created: 0,
          model: MODEL,
          choices: [
            {
              index: 0,
              text: ANSWER,
              logprobs: { token_logprobs: logprobs, tokens: answerIds.map(() => 'x') },
              finish_reason: 'stop',
              token_ids: answerIds,
              prompt_token_ids: promptIds,
            },
          ],
          usage,
        };
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const send = (v: unknown) => {
        const text = JSON.stringify(v);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.url === '/v1/models')
        return send({ object: 'list', data: [{ id: MODEL, object: 'model', max_model_len: 131072 }] });
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const session = String(req.headers['x-session-id']);
      let prompt: number[];
      if (req.url === '/v1/completions') prompt = body.prompt as number[];
      else {
        const prev = sessions.get(session);
        if (prev) prompt = [...prev, ...answerIds, 198, ...nextTurn];
        else {
          const urls = (body.messages as Message[]).flatMap((m) =>
            Array.isArray(m.content)
              ? m.content.flatMap((p) =>
                  typeof p === 'object' && typeof p.image_url === 'object' && p.image_url
                    ? [(p.image_url as { url: string }).url]
                    : [],
                )
              : [],
          );
          const pads = await Promise.all(urls.map(padCount));
          prompt = (
            await renderTokens(
              profile,
              body.messages,
              { as: 'vllm', addGenerationPrompt: true },
              padCountExpansions(pads),
            )
          ).expanded;
        }
      }
      sessions.set(session, prompt);
      send(answer(prompt, req.url !== '/v1/completions'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.stdout.write(`engine on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
}

// --- the figure ----------------------------------------------------------------------------------

export function startChild(args: string[], ready: RegExp): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) resolve({ child, match: m });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${err}`)));
  });
}

/** CPU seconds the process has used (user + system), from /proc (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = fs
    .readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export function status(pid: number): { rssMB: number; hwmMB: number } {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(text)?.[1] ?? NaN);
  return { rssMB: kb('VmRSS') / 1024, hwmMB: kb('VmHWM') / 1024 };
}

/** A first message with an image and text sized so the rendered prompt is about `tokens` long. */
async function firstMessage(tokens: number, image: string): Promise<{ messages: Message[]; promptTokens: number }> {
  const profile = loadProfile('qwen2.5-vl');
  const words =
    'the triangle has sides of three and four units so the hypotenuse follows from the theorem of Pythagoras and';
  const pads = imageTokens(448, 448, profile.vision).padCount;
  let text = '';
  for (;;) {
    const messages: Message[] = [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: image } },
          { type: 'text', text },
        ],
      },
    ];
    const n =
      (await profile.tokenizer.encode(renderText(profile, messages, { as: 'vllm', addGenerationPrompt: true })))
        .length -
      1 +
      pads;
    if (n >= tokens) return { messages, promptTokens: n };
    text += ` ${words}`.repeat(Math.max(1, Math.floor((tokens - n) / 25)));
  }
}

interface Combo {
  mode: 'record' | 'guard' | 'guard-refuse' | 'continuity';
  history: number;
  sessions: number;
  image: boolean;
}

async function runCombo(gateway: string, combo: Combo, turns: number, first: Message[], tag: string): Promise<void> {
  const post = (messages: Message[], session: string) =>
    new Promise<{ choices: { message: { content: string } }[] }>((resolve, reject) => {
      const body = JSON.stringify({ model: MODEL, messages });
      const req = http.request(
        `${gateway}/v1/chat/completions`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'x-session-id': session,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            res.statusCode === 200
              ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')))
              : reject(new Error(`${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 300)}`)),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: combo.sessions }, async (_, s) => {
      const messages: Message[] = [...first];
      for (let t = 0; t < turns; t++) {
        const a = await post(messages, `${tag}-${s}`);
        messages.push({ role: 'assistant', content: a.choices[0]!.message.content }, { role: 'user', content: NEXT });
      }
    }),
  );
}

/** The capture lines written since the last call (each file read from where the last read stopped). */
function newLines(dir: string, read: Map<string, number>): string[] {
  const out: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    const file = path.join(dir, name);
    const from = read.get(file) ?? 0;
    const size = fs.statSync(file).size;
    if (size <= from) continue;
    const fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(size - from);
    fs.readSync(fd, buf, 0, buf.length, from);
    fs.closeSync(fd);
    const text = buf.toString('utf8');
    const end = text.lastIndexOf('\n') + 1;
    read.set(file, from + Buffer.byteLength(text.slice(0, end)));
    out.push(
      ...text
        .slice(0, end)
        .split('\n')
        .filter((l) => l !== ''),
    );
  }
  return out;
}

/** `/metrics`' count of characters the gateway tokenized. */
async function tokenizedSoFar(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/rollscope_gateway_tokenized_chars_total\{[^}]*\} (\S+)/.exec(text)?.[1] ?? 0);
}

/**
 * What a session holds after the call `line` records: its messages (as text, one byte a character
 * for ASCII), its prompt and generated ids (8 bytes each in a V8 array), and with a predicted
 * prompt (guard-refuse) the prompt text and its ids once more.
 */
function heldBytes(line: unknown, mode: Combo['mode']): number {
  const l = line as {
    request: { messages?: unknown; prompt?: unknown };
    response: { prompt_token_ids?: number[]; choices?: { prompt_token_ids?: number[]; token_ids?: number[] }[] };
  };
  const messages = JSON.stringify(l.request.messages ?? '').length;
  const prompt = (l.response.prompt_token_ids ?? l.response.choices?.[0]?.prompt_token_ids ?? []).length;
  const generated = (l.response.choices?.[0]?.token_ids ?? []).length;
  return messages + 8 * (prompt + generated) + (mode === 'guard-refuse' ? messages + 8 * prompt : 0);
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export async function gatewayFigure(quick: boolean): Promise<Figure> {
  fs.mkdirSync(benchDir(), { recursive: true });
  const dir = fs.mkdtempSync(path.join(benchDir(), 'gateway-'));
  const children: ChildProcess[] = [];
  try {
    const engine = await startChild(
      [path.join(REPO, 'bin', 'tsx.js'), path.join(REPO, 'bench', 'gateway.ts'), '--instant-engine'],
      /engine on (http:\/\/\S+)/,
    );
    children.push(engine.child);
    const upstream = engine.match[1]!;
    const image = `data:image/png;base64,${(
      await sharp({ create: { width: 448, height: 448, channels: 3, background: '#4a7' } })
        .png()
        .toBuffer()
    ).toString('base64')}`;
    const histories = quick ? [2000] : [2000, 16000];
    const concurrencies = quick ? [1, 16] : [1, 16, 64];
    const turns = quick ? 3 : 8;
    const modes: Combo['mode'][] = quick ? ['guard', 'continuity'] : ['record', 'guard', 'guard-refuse', 'continuity'];
    const results: Measure[] = [];
    const targets: Target[] = [];
    const rows: Record<string, unknown>[] = [];
    const firsts = new Map<number, { messages: Message[]; promptTokens: number }>();
    for (const h of histories) firsts.set(h, await firstMessage(h, image));
    const textOnly = new Map<number, Message[]>();
    for (const [h, f] of firsts)
      textOnly.set(h, [{ role: 'user', content: (f.messages[0]!.content as { text?: string }[])[1]!.text! }]);
    const profile = loadProfile('qwen2.5-vl');
    const rendered = (m: Message[]) => renderText(profile, m, { as: 'vllm', addGenerationPrompt: true }).length;
    const promptChars = (h: number) => rendered(firsts.get(h)!.messages);
    const textPromptChars = (h: number) => rendered(textOnly.get(h)!);

    for (const mode of modes) {
      const out = path.join(dir, mode);
      const args = [
        ROLLSCOPE,
        'gateway',
        '--upstream',
        upstream,
        '--listen',
        '127.0.0.1:0',
        '--out',
        out,
        '--mode',
        mode === 'guard-refuse' ? 'guard' : mode,
        '--replica',
        'bench',
      ];
      if (mode === 'guard-refuse') args.push('--on-break', 'refuse');
      const gw = await startChild(args, /listening on (http:\/\/\S+)/);
      // The peak a process reaches while it builds the tokenizer, before any call.
      const started = status(gw.child.pid!);
      const read = new Map<string, number>();
      const held = new Map<string, number>();
      const tokenizedLater = { chars: 0, calls: 0 };
      children.push(gw.child);
      const url = gw.match[1]!;
      // One session to warm the process up (the tokenizer, the template, the code paths).
      await runCombo(
        url,
        { mode, history: 2000, sessions: 1, image: true },
        2,
        firsts.get(2000)!.messages,
        `${mode}-warm`,
      );
      const idle = status(gw.child.pid!);
      // Continuity sends ids only for text-only sessions on vLLM (images: rendered by the engine, checked).
      const variants = mode === 'continuity' ? [true, false] : [true];
      for (const image of variants)
        for (const history of histories)
          for (const sessions of concurrencies) {
            const tag = `${mode}-${image ? 'img' : 'txt'}-${history}-${sessions}`;
            const tokenized0 = await tokenizedSoFar(url);
            const cpu0 = cpuSeconds(gw.child.pid!);
            await runCombo(
              url,
              { mode, history, sessions, image },
              turns,
              image ? firsts.get(history)!.messages : textOnly.get(history)!,
              tag,
            );
            const cpu = cpuSeconds(gw.child.pid!) - cpu0;
            const tokenizedNow = (await tokenizedSoFar(url)) - tokenized0;
            const lines = newLines(out, read)
              .filter((l) => l.includes(`"session_id":"${tag}-`))
              .map(
                (l) =>
                  JSON.parse(l) as {
                    gateway: { ms: { gateway: number }; turn?: number; findings: unknown[]; upstream: string };
                  },
              );
            for (const l of lines) held.set((l as unknown as { session_id: string }).session_id, heldBytes(l, mode));
            // A session's first call tokenizes its whole prompt once (guard-refuse); what matters is every later one.
            const firstChars =
              mode === 'guard-refuse' ? sessions * (image ? promptChars(history) : textPromptChars(history)) : 0;
            const laterCalls = lines.filter((l) => (l.gateway.turn ?? 0) > 0).length;
            tokenizedLater.chars += Math.max(0, tokenizedNow - firstChars);
            tokenizedLater.calls += laterCalls;
            const later = lines
              .filter((l) => (l.gateway.turn ?? 0) > 0)
              .map((l) => l.gateway.ms.gateway)
              .sort((a, b) => a - b);
            const all = lines.map((l) => l.gateway.ms.gateway).sort((a, b) => a - b);
            const findings = lines.reduce((n, l) => n + l.gateway.findings.length, 0);
            const tokenIn = lines.filter((l) => l.gateway.upstream !== '/v1/chat/completions').length;
            const row = {
              mode,
              image,
              history,
              sessions,
              calls: all.length,
              p50: round(percentile(all, 50), 3),
              p99: round(percentile(all, 99), 3),
              laterP50: round(percentile(later, 50), 3),
              laterP99: round(percentile(later, 99), 3),
              findings,
              tokenIn,
              cpuPerCallMs: round((cpu * 1000) / Math.max(1, all.length), 2),
            };
            rows.push(row);
            results.push({
              name: `${mode}${image ? ', image' : ', text only'}, ${history / 1000}k-token history, ${sessions} session(s)`,
              value: row.p99,
              unit: 'ms p99',
              note: `p50 ${row.p50} ms over ${row.calls} calls (turns after the first: p50 ${row.laterP50}, p99 ${row.laterP99} ms); CPU ${row.cpuPerCallMs} ms a call; ${findings} finding(s)${tokenIn ? `; ${tokenIn} sent as ids` : ''}`,
            });
            if (findings > 0) throw new Error(`${tag}: the checks found ${findings} finding(s) in well-formed calls`);
          }
      const metrics = await (await fetch(`${url}/metrics`)).text();
      const tokenized = Number(/rollscope_gateway_tokenized_chars_total\{[^}]*\} (\S+)/.exec(metrics)?.[1] ?? NaN);
      const calls = Number(/rollscope_gateway_calls_total\{[^}]*outcome="ok"[^}]*\} (\S+)/.exec(metrics)?.[1] ?? NaN);
      const mem = status(gw.child.pid!);
      const sessionsHeld = Number(/rollscope_gateway_sessions\{[^}]*\} (\S+)/.exec(metrics)?.[1] ?? NaN);
      const heldMB = [...held.values()].reduce((a, b) => a + b, 0) / 2 ** 20;
      const perLater = tokenizedLater.calls > 0 ? tokenizedLater.chars / tokenizedLater.calls : 0;
      results.push({
        name: `${mode}: tokenized by the gateway`,
        value: round(perLater, 1),
        unit: "chars per call after a session's first",
        note: `${tokenized} chars in all over ${calls} calls, histories of ${histories.map((h) => `~${h / 1000}k`).join(' and ')} tokens (~${histories.map((h) => round(promptChars(h) / 1000)).join(' and ')}k chars)`,
      });
      results.push({
        name: `${mode}: gateway RSS`,
        value: mem.hwmMB,
        unit: 'MB peak',
        note: `${round(started.hwmMB)} MB peak at start-up (the tokenizer's build), ${round(idle.rssMB)} MB after warm-up, ${round(mem.rssMB)} MB at the end; ${sessionsHeld} sessions held, ~${round(heldMB)} MB of messages and ids`,
      });
      if (mode === 'guard') {
        const at2k = rows.filter((r) => r.mode === 'guard' && r.history === 2000);
        targets.push({
          name: 'guard own time at 2k tokens',
          wanted: 'p99 ≤ 5 ms per call in guard mode with 2k-token histories',
          measured: `p99 ${at2k.map((r) => r.p99).join(' / ')} ms (CPU ${at2k.map((r) => r.cpuPerCallMs).join(' / ')} ms a call) at ${concurrencies.join(' / ')} sessions`,
          met: at2k.every((r) => (r.p99 as number) <= 5),
        });
        targets.push({
          name: 'guard RSS',
          wanted: 'RSS ≤ 200 MB plus what the sessions hold',
          measured: `${round(mem.rssMB)} MB at the end with ${sessionsHeld} sessions holding ~${round(heldMB)} MB: ${round(mem.rssMB - heldMB)} MB besides, ~160 MB of it the tokenizer (peak ${round(mem.hwmMB)} MB; ${round(started.hwmMB)} MB of it reached at start-up, building the tokenizer)`,
          met: mem.rssMB - heldMB <= 200,
        });
      }
      if (mode === 'continuity' || mode === 'guard-refuse')
        targets.push({
          name: `${mode}: no history tokenized twice`,
          wanted: 'only the new messages are tokenized',
          measured: `${round(perLater, 1)} chars tokenized per call after a session's first, against histories of ~${histories.map((h) => round(promptChars(h) / 1000)).join('/')}k chars`,
          met: perLater < 1000,
        });
      gw.child.kill('SIGTERM');
      await new Promise((r) => gw.child.once('exit', r));
    }
    return {
      figure: 'gateway',
      title: 'rollscope gateway: its own time per call (engine excluded), by mode, history and concurrent sessions',
      status: 'measured',
      data: { turnsPerSession: turns, histories, concurrencies, image: '448×448 PNG per session (256 pads)', rows },
      results,
      references: [],
      targets,
      notes: [
        "Own time is what each capture line records: from the request's arrival to the answer, minus the wait for the engine; the engine answers at once from another process.",
        "guard checks the engine's ids and tokenizes nothing; guard with --on-break refuse predicts the prompt first (renders the conversation, tokenizes from the last shared <|im_start|>); continuity tokenizes only the new messages.",
        'continuity on vLLM sends ids only for sessions without images (vLLM takes no images with a token-id prompt): image sessions are rendered by the engine and checked, text-only ones go to /v1/completions.',
        "Sessions run in lockstep (the engine answers at once, so all of them call again at the same instant): at 16 and 64 sessions a call's own time includes waiting behind the others' work on the one event loop; CPU a call is the process's CPU time over the calls.",
        'The load generator runs in the bench process; at 64 sessions the 2 cores are shared by it, the gateway and the engine.',
        'RSS: a rollscope process with a profile loaded holds ~160 MB for the Hugging Face tokenizer (measured: a bare process 74 MB, after loadProfile 233 MB), before any session.',
      ],
    };
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--instant-engine')) await instantEngine();
else if (isMain(import.meta.url)) await runStandalone(gatewayFigure);
