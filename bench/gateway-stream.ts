// Figure "gateway-stream": what the gateway adds to a streamed call's time to first token, p50 and
// p99, at 1, 16 and 64 concurrent sessions in record, guard and continuity (continuity streams the
// token-in call and relays its chunks), and the gateway's memory around very long streamed prompts:
// RSS after a 10 MB and a 50 MB prompt (guard, streamed: the mode that predicts the prompt before
// the answer) and after their session expired. The gateway is the real CLI in a child process; the
// engine a stand-in in another (`--stream-engine`) that streams at once and says when it received
// each request and sent its first chunk (GET /timings), so the gateway's share is the client's time
// to first content chunk minus the engine's own.
// `node bin/tsx.js bench/gateway-stream.ts [--quick]`
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { loadProfile } from '../server/profiles/profile.ts';
import { padCountExpansions, renderTokens } from '../server/analysis/render.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';
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
import { percentile, startChild, status as processStatus } from './gateway.ts';

const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';
const ANSWER = 'I will look at the figure again and measure the next side of the triangle.';
const now = () => performance.timeOrigin + performance.now();

// --- the streaming engine (a child process) -------------------------------------------------------

async function streamEngine(): Promise<void> {
  const profile = loadProfile('qwen2.5-vl');
  const answerIds = [...(await profile.tokenizer.encode(ANSWER)), qwenNamed(profile.ids).imEnd];
  const pieces = answerIds.map((id) => profile.tokenizer.decodeSync([id]));
  const nextTurn = await profile.tokenizer.encode('<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n');
  // Each session's prompt: the first rendered, each later one the previous ⧺ the answer ⧺ the next turn.
  const sessions = new Map<string, number[]>();
  const timings: { session: string; received: number; first: number }[] = [];
  const server = http.createServer((req, res) => {
    const received = now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, max_model_len: 32768 }] }));
      }
      if (req.url === '/timings') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(timings.splice(0)));
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const session = String(req.headers['x-session-id'] ?? '');
      const chat = req.url === '/v1/chat/completions';
      let prompt: number[];
      if (!chat) prompt = Array.isArray(body.prompt) ? body.prompt : [1];
      else {
        const prev = sessions.get(session);
        // A very long prompt (the memory measure) is not rendered: its ids do not matter there.
        prompt = prev
          ? [...prev, ...answerIds, 198, ...nextTurn]
          : JSON.stringify(body.messages).length > 1_000_000
            ? [1, 2, 3]
            : (
                await renderTokens(
                  profile,
                  body.messages as Message[],
                  { as: 'vllm', addGenerationPrompt: true },
                  padCountExpansions([]),
                )
              ).expanded;
      }
      sessions.set(session, prompt);
      const head = { id: 'x', object: chat ? 'chat.completion.chunk' : 'text_completion', created: 0, model: MODEL };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(
          JSON.stringify({
            ...head,
            object: chat ? 'chat.completion' : 'text_completion',
            prompt_token_ids: prompt,
            choices: [
              chat
                ? {
                    index: 0,
                    message: { role: 'assistant', content: ANSWER },
                    finish_reason: 'stop',
                    token_ids: answerIds,
                  }
                : { index: 0, text: ANSWER, finish_reason: 'stop', token_ids: answerIds, prompt_token_ids: prompt },
            ],
            usage: { prompt_tokens: prompt.length, completion_tokens: answerIds.length },
          }),
        );
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (v: unknown) => res.write(`data: ${JSON.stringify(v)}\n\n`);
      if (chat)
        send({
          ...head,
          choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
          prompt_token_ids: prompt,
        });
      timings.push({ session, received, first: now() });
      answerIds.forEach((id, k) => {
        const last = k === answerIds.length - 1;
        const lp = { token_logprobs: [-0.1], tokens: [`token_id:${id}`], top_logprobs: [{ [`token_id:${id}`]: -0.1 }] };
        send({
          ...head,
          choices: [
            chat
              ? {
                  index: 0,
                  delta: { content: last ? '' : pieces[k] },
                  logprobs: { content: [{ token: pieces[k], logprob: -0.1, top_logprobs: [] }] },
                  finish_reason: last ? 'stop' : null,
                  token_ids: [id],
                }
              : {
                  index: 0,
                  text: last ? '' : pieces[k],
                  logprobs: lp,
                  finish_reason: last ? 'stop' : null,
                  token_ids: [id],
                  ...(k === 0 ? { prompt_token_ids: prompt } : {}),
                },
          ],
        });
      });
      send({ ...head, choices: [], usage: { prompt_tokens: prompt.length, completion_tokens: answerIds.length } });
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.stdout.write(`engine on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
}

// --- the figure ----------------------------------------------------------------------------------

/** A streamed chat call: the time from sending to the first chunk with content, and the whole answer's text. */
function streamedCall(
  url: string,
  body: Record<string, unknown>,
  session: string,
  agent: http.Agent,
): Promise<{ sent: number; firstContent: number; text: string; status: number }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify({ ...body, stream: true });
    const sent = now();
    let firstContent = Number.NaN;
    let text = '';
    const req = http.request(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(data),
          'x-session-id': session,
        },
      },
      (res) => {
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          buffer += d;
          let at = buffer.indexOf('\n\n');
          while (at >= 0) {
            const event = buffer.slice(0, at).replace(/^data: /, '');
            buffer = buffer.slice(at + 2);
            at = buffer.indexOf('\n\n');
            if (event === '[DONE]' || !event.startsWith('{')) continue;
            const delta = JSON.parse(event).choices?.[0]?.delta?.content;
            if (typeof delta === 'string' && delta !== '') {
              if (Number.isNaN(firstContent)) firstContent = now();
              text += delta;
            }
          }
        });
        res.on('end', () => resolve({ sent, firstContent, text, status: res.statusCode ?? 0 }));
      },
    );
    req.on('error', reject);
    // A connection the gateway drops while the body is still being written fails on the socket.
    req.on('socket', (socket) => {
      socket.once('error', reject);
      req.once('close', () => socket.off('error', reject));
    });
    req.end(data);
  });
}

async function ttft(
  upstream: string,
  dir: string,
  mode: 'record' | 'guard' | 'continuity',
  concurrencies: number[],
  turns: number,
): Promise<{ sessions: number; p50: number; p99: number; calls: number; tokenIn: number }[]> {
  const out = path.join(dir, `ttft-${mode}`);
  const gw = await startChild(
    [
      ROLLSCOPE,
      'gateway',
      '--upstream',
      upstream,
      '--listen',
      '127.0.0.1:0',
      '--out',
      out,
      '--mode',
      mode,
      '--replica',
      'bench',
    ],
    /listening on (http:\/\/\S+)/,
  );
  const url = gw.match[1]!;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const rows = [];
  try {
    for (const [pass, sessions] of [1, ...concurrencies].entries()) {
      const warm = pass === 0;
      const added: number[] = [];
      await fetch(`${upstream}/timings`);
      const client: { session: string; sent: number; firstContent: number }[] = [];
      await Promise.all(
        Array.from({ length: sessions }, async (_, s) => {
          const session = `${mode}-${sessions}-${s}-${warm ? 'warm' : 'run'}`;
          const messages: Message[] = [{ role: 'user', content: `Session ${s}: how long is the hypotenuse?` }];
          for (let t = 0; t < turns; t++) {
            const r = await streamedCall(url, { model: MODEL, messages }, session, agent);
            if (r.status !== 200) throw new Error(`${mode}: ${r.status}`);
            if (t > 0) client.push({ session, sent: r.sent, firstContent: r.firstContent });
            messages.push({ role: 'assistant', content: r.text }, { role: 'user', content: 'Go on.' });
          }
        }),
      );
      const engine = (await (await fetch(`${upstream}/timings`)).json()) as {
        session: string;
        received: number;
        first: number;
      }[];
      // Each session's calls in order: the engine's k-th call of a session is the client's k-th.
      const bySession = new Map<string, { received: number; first: number }[]>();
      for (const e of engine) bySession.set(e.session, [...(bySession.get(e.session) ?? []), e]);
      const seen = new Map<string, number>();
      for (const c of client) {
        const k = (seen.get(c.session) ?? 0) + 1; // turn 0 is not in `client`
        seen.set(c.session, k);
        const e = bySession.get(c.session)?.[k];
        if (e) added.push(c.firstContent - c.sent - (e.first - e.received));
      }
      if (warm) continue; // the first pass warms the gateway up
      added.sort((a, b) => a - b);
      const lines = fs
        .readdirSync(out)
        .flatMap((f) => fs.readFileSync(path.join(out, f), 'utf8').split('\n'))
        .filter((l) => l.includes(`"session_id":"${mode}-${sessions}-`));
      rows.push({
        sessions,
        p50: round(percentile(added, 50), 2),
        p99: round(percentile(added, 99), 2),
        calls: added.length,
        tokenIn: lines.filter((l) => l.includes('"upstream":"/v1/completions"')).length,
      });
    }
  } finally {
    agent.destroy();
    gw.child.kill('SIGTERM');
    await new Promise((r) => gw.child.once('exit', r));
  }
  return rows;
}

/** RSS of a gateway (guard) around one very long streamed prompt, and after its session expired. */
async function longPrompt(
  upstream: string,
  dir: string,
  megabytes: number,
): Promise<{ before: number; after: number; expired: number; status: number; ownMs: number; note: string }> {
  const out = path.join(dir, `long-${megabytes}`);
  const gw = await startChild(
    [
      ROLLSCOPE,
      'gateway',
      '--upstream',
      upstream,
      '--listen',
      '127.0.0.1:0',
      '--out',
      out,
      '--mode',
      'guard',
      '--session-ttl',
      '2',
      // The default cap (32 MiB) refuses a 50 MB body with 413: measured with room for it.
      '--max-body-bytes',
      String(64 * 2 ** 20),
    ],
    /listening on (http:\/\/\S+)/,
  );
  const url = gw.match[1]!;
  const agent = new http.Agent({ keepAlive: true });
  try {
    const warm = await streamedCall(url, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, 'warm', agent);
    if (warm.status !== 200) throw new Error(`warm-up: ${warm.status}`);
    const before = processStatus(gw.child.pid!).rssMB;
    const line = 'the tool printed another line of its long output, with numbers 12345 and words\n';
    const content = line.repeat(Math.ceil((megabytes * 2 ** 20) / line.length));
    const r = await streamedCall(url, { model: MODEL, messages: [{ role: 'user', content }] }, 'long', agent).catch(
      (e: Error) => {
        throw new Error(`the ${megabytes} MB call failed: ${e.message} (gateway exit ${gw.child.exitCode})`);
      },
    );
    const after = processStatus(gw.child.pid!).rssMB;
    // Past the TTL the session is forgotten on the next call; then give the heap a moment to shrink.
    await new Promise((res) => setTimeout(res, 2500));
    await streamedCall(url, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, 'after', agent);
    await new Promise((res) => setTimeout(res, 3000));
    const expired = processStatus(gw.child.pid!).rssMB;
    const captured = fs
      .readdirSync(out)
      .flatMap((f) => fs.readFileSync(path.join(out, f), 'utf8').split('\n'))
      .find((l) => l.includes('"session_id":"long"'));
    const g = captured
      ? (JSON.parse(captured) as { gateway: { ms: { gateway: number }; notes: string[] } }).gateway
      : undefined;
    return {
      before: round(before),
      after: round(after),
      expired: round(expired),
      status: r.status,
      ownMs: round(g?.ms.gateway ?? Number.NaN),
      note: g?.notes.find((n) => /not predicted/.test(n)) ?? 'predicted',
    };
  } finally {
    agent.destroy();
    gw.child.kill('SIGTERM');
    await new Promise((r) => gw.child.once('exit', r));
  }
}

export async function gatewayStreamFigure(quick: boolean): Promise<Figure> {
  fs.mkdirSync(benchDir(), { recursive: true });
  const dir = fs.mkdtempSync(path.join(benchDir(), 'gateway-stream-'));
  const children: ChildProcess[] = [];
  try {
    const engine = await startChild(
      [path.join(REPO, 'bin', 'tsx.js'), path.join(REPO, 'bench', 'gateway-stream.ts'), '--stream-engine'],
      /engine on (http:\/\/\S+)/,
    );
    children.push(engine.child);
    const upstream = engine.match[1]!;
    const concurrencies = quick ? [1, 16] : [1, 16, 64];
    const turns = quick ? 3 : 6;
    const results: Measure[] = [];
    const targets: Target[] = [];
    const rows: Record<string, unknown>[] = [];
    for (const mode of ['record', 'guard', 'continuity'] as const)
      for (const row of await ttft(upstream, dir, mode, concurrencies, turns)) {
        process.stderr.write(`gateway-stream: ${mode}, ${row.sessions} session(s) measured\n`);
        rows.push({ mode, ...row });
        results.push({
          name: `${mode}, streamed: time to first token added by the gateway, ${row.sessions} session(s)`,
          value: row.p99,
          unit: 'ms p99',
          note: `p50 ${row.p50} ms over ${row.calls} calls after each session's first${row.tokenIn ? `; ${row.tokenIn} sent as ids` : ''}`,
        });
      }
    const memory: Record<string, unknown>[] = [];
    for (const mb of quick ? [10] : [10, 50]) {
      process.stderr.write(`gateway-stream: a ${mb} MB prompt\n`);
      let m: Awaited<ReturnType<typeof longPrompt>>;
      try {
        m = await longPrompt(upstream, dir, mb);
      } catch (e) {
        memory.push({ megabytes: mb, error: (e as Error).message });
        results.push({
          name: `guard, a ${mb} MB streamed prompt: gateway RSS`,
          value: null,
          unit: 'MB',
          note: (e as Error).message,
        });
        continue;
      }
      memory.push({ megabytes: mb, ...m });
      results.push({
        name: `guard, a ${mb} MB streamed prompt: gateway RSS`,
        value: m.after,
        unit: 'MB after the call',
        note: `${m.before} MB before, ${m.expired} MB after its session expired; status ${m.status}; own time ${m.ownMs} ms; ${m.note}`,
      });
    }
    const continuity = rows.filter((r) => r.mode === 'continuity');
    targets.push({
      name: 'continuity streams',
      wanted: 'continuity streams the token-in call: its time to first token is close to record and guard',
      measured: `continuity p50 ${continuity.map((r) => r.p50).join(' / ')} ms, guard p50 ${rows
        .filter((r) => r.mode === 'guard')
        .map((r) => r.p50)
        .join(' / ')} ms at ${concurrencies.join(' / ')} sessions`,
      met: null,
    });
    targets.push({
      name: 'bounded work per long prompt',
      wanted: 'no tokenization of a prompt that cannot fit; memory returns after the session ends',
      measured: memory
        .map((m) => `${m.megabytes} MB: ${m.before} → ${m.after} → ${m.expired} MB, own ${m.ownMs} ms`)
        .join('; '),
      met: null,
    });
    return {
      figure: 'gateway-stream',
      title:
        'rollscope gateway: time to first token it adds to streamed calls, and its memory around very long prompts',
      status: 'measured',
      data: { turnsPerSession: turns, concurrencies, rows, memory },
      results,
      references: [],
      targets,
      notes: [
        "Added time to first token: the client's time from sending a streamed call to its first chunk with content, minus the engine's own (from receiving the request to sending its first chunk, which it reports); the engine streams at once from another process.",
        "record and guard relay the engine's own chat stream; continuity sends ids to /v1/completions, streamed, and relays each chunk in the chat shape.",
        "Calls after each session's first (continuity's first call is rendered by the engine).",
        "Long prompts: guard with a streamed call predicts the prompt before the answer (the findings header); a prompt past the engine's max_model_len (32768 here) is tokenized only until it is known not to fit, the call goes on to the engine. RSS is the process's resident set (V8 may keep freed heap).",
      ],
    };
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--stream-engine')) await streamEngine();
else if (isMain(import.meta.url)) await runStandalone(gatewayStreamFigure);
