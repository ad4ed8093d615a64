// The gateway as a server in front of production engines: it stops like one (SIGTERM under load
// leaves every call the engine answered in the capture; idle, it exits at once whatever the grace;
// no timer of its own outlives it), answers probes (/health, /ping, /version), bounds its work per
// call (no tokenization of a prompt that cannot fit; nesting-limited JSON), sends a request once
// more when a kept-alive connection fails before the answer began (never after), and relays a
// continuity stream as it comes.
import fs from 'node:fs';
import http from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { startEngineStandin } from './support/engine-standin.ts';
import { waitFor } from './support/wait.ts';
import {
  assistantMessage,
  captureFiles,
  exited,
  MODEL,
  post,
  readCapture,
  type Rig,
  spawnGateway,
  startRig,
  tempDir,
} from './support/gateway-harness.ts';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const question = [{ role: 'user', content: 'Where is the cat?' }];

describe('stopping like a server', () => {
  it('exits 0 on SIGTERM when idle, with an hour of grace it does not wait for', async () => {
    const engine = await startEngineStandin({ engine: 'vllm', model: MODEL, script: () => ({ text: 'ok' }) });
    try {
      const out = tempDir('gw-idle');
      const g = await spawnGateway([
        '--upstream',
        engine.url,
        '--listen',
        '127.0.0.1:0',
        '--out',
        out,
        '--grace',
        '3600',
      ]);
      const a = await post(
        `${g.url}/v1/chat/completions`,
        { model: MODEL, messages: question },
        { 'x-session-id': 'i' },
      );
      expect(a.status).toBe(200);
      g.child.kill('SIGTERM');
      expect(await exited(g.child)).toEqual({ code: 0, signal: null });
      expect(g.stderr()).toMatch(/stopped: the capture is flushed and closed/);
      expect(readCapture(out).map((l) => l.gateway.outcome)).toEqual(['ok']);
    } finally {
      await engine.close();
    }
  });

  it('leaves no timer of its own behind once closed', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const engine = await startEngineStandin({ engine: 'vllm', model: MODEL, script: () => ({ text: 'ok' }) });
    const { startGateway } = await import('../server/gateway/server.ts');
    const { GatewayConfig } = await import('../server/gateway/config.ts');
    const g = await startGateway(GatewayConfig.parse({ upstream: engine.url, out: tempDir('gw-timer'), port: 0 }));
    const before = timers();
    await g.close(3_600_000);
    expect(timers()).toBeLessThanOrEqual(before);
    await engine.close();
  });

  it('finishes a call in flight when told to stop, telling its kept-alive connection to close', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'slow answer' }) });
    const held = rig.engine.hold();
    const agent = new http.Agent({ keepAlive: true });
    const pending = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
      const req = http.request(
        `${rig!.url}/v1/chat/completions`,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-session-id': 'slow' } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d) => {
            body += d;
          });
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: MODEL, messages: question }));
    });
    // The engine holds the call: it is in flight when the gateway is told to stop, and answered after.
    await held.arrived;
    const closing = rig.gateway.close(3_600_000);
    held.release();
    await Promise.all([closing, pending]);
    const got = await pending;
    expect(got.status).toBe(200);
    expect(got.connection).toBe('close');
    expect(JSON.parse(got.body).choices[0].message.content).toBe('slow answer');
    expect(readCapture(rig.out).map((l) => [l.session_id, l.gateway.outcome])).toEqual([['slow', 'ok']]);
    agent.destroy();
  });

  it('under load (16 sessions × 6 turns), SIGTERM leaves every call the engine answered in the capture', async () => {
    let generated = 0;
    let stop: (() => Promise<unknown>) | undefined;
    let stopping: Promise<unknown> | undefined;
    const engine = await startEngineStandin({
      engine: 'vllm',
      model: MODEL,
      script: async (c, i) => {
        // SIGTERM arrives while calls are in flight: at the engine's 40th generation. The calls the
        // engine has from then on are answered once the gateway has begun to stop, so their agents
        // send their next turns to a gateway that is stopping.
        if (c.headers['x-session-id'] && ++generated === 40) stopping = stop?.();
        if (stopping) await stopping;
        return { text: `Turn answer ${i}.` };
      },
    });
    try {
      const out = tempDir('gw-load');
      const g = await spawnGateway([
        '--upstream',
        engine.url,
        '--listen',
        '127.0.0.1:0',
        '--out',
        out,
        '--mode',
        'continuity',
        '--grace',
        '3600',
      ]);
      stop = () => {
        g.child.kill('SIGTERM');
        return waitFor('the gateway to begin stopping', () => /stopping/.test(g.stderr()));
      };
      const statuses: (number | string)[] = [];
      await Promise.all(
        Array.from({ length: 16 }, async (_, s) => {
          const messages: Record<string, unknown>[] = [{ role: 'user', content: `Session ${s}: count.` }];
          for (let turn = 0; turn < 6; turn++) {
            let a: Awaited<ReturnType<typeof post>>;
            try {
              a = await post(
                `${g.url}/v1/chat/completions`,
                { model: MODEL, messages, ...(turn % 2 ? { stream: true } : {}) },
                {
                  'x-session-id': `load-${s}`,
                },
              );
            } catch (e) {
              statuses.push(String((e as Error & { cause?: { code?: string } }).cause?.code ?? 'error'));
              return;
            }
            statuses.push(a.status);
            if (a.status !== 200) return;
            messages.push(
              { role: 'assistant', content: assistantMessage(a).content },
              { role: 'user', content: 'More.' },
            );
          }
        }),
      );
      expect(await exited(g.child)).toEqual({ code: 0, signal: null });
      expect(g.stderr()).not.toMatch(/capture file \S+ is closed|internal error/);
      // Refused after the stop: 503 (Connection: close) on a kept-alive connection, or no connection at all.
      for (const s of statuses) expect([200, 503, 'ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET']).toContain(s);
      const answered = engine.calls.filter((c) => c.generated && c.status === 200 && c.headers['x-session-id']);
      expect(answered.length).toBeGreaterThanOrEqual(40);
      const captured = new Set(
        readCapture(out)
          .filter((l) => l.gateway.outcome === 'ok')
          .map((l) => {
            const r = l.response as { prompt_token_ids?: number[]; choices: { prompt_token_ids?: number[] }[] };
            return `${l.session_id} ${(r.prompt_token_ids ?? r.choices[0]!.prompt_token_ids)!.join(',')}`;
          }),
      );
      const missing = answered.filter((c) => !captured.has(`${c.headers['x-session-id']} ${c.promptIds.join(',')}`));
      expect(missing.map((c) => c.headers['x-session-id'])).toEqual([]);
      for (const f of captureFiles(out)) expect(fs.readFileSync(f, 'utf8').endsWith('\n')).toBe(true);
    } finally {
      await engine.close();
    }
  });
});

describe('probes', () => {
  it('/health and /ping answer 200 while the gateway and the engine are ready, 503 when the engine is not; /version names both', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'ok' }) });
    for (const path of ['/health', '/ping']) {
      const r = await fetch(`${rig.url}${path}`);
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({
        status: 'ok',
        gateway: { status: 'ready' },
        engine: { ok: true, status: 200 },
      });
    }
    const v = await (await fetch(`${rig.url}/version`)).json();
    expect(v).toMatchObject({ gateway: { name: 'rollscope' }, engine: { version: '0.11.0' } });
    expect(v.version).toBe(JSON.parse(fs.readFileSync('package.json', 'utf8')).version);
    await rig.engine.close();
    const down = await fetch(`${rig.url}/health`);
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({
      status: 'unavailable',
      gateway: { status: 'ready' },
      engine: { ok: false },
    });
  });
});

describe('bounded work per call', () => {
  it('answers 400 naming the nesting limit to a body of 200k nested brackets', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'ok' }) });
    const body = `{"model":"m","messages":[{"role":"user","content":${'['.repeat(200_000)}${']'.repeat(200_000)}}]}`;
    const r = await fetch(`${rig.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(r.status).toBe(400);
    expect((await r.json()).error.message).toMatch(/nests arrays and objects deeper than the limit of 64 levels/);
    expect(rig.engine.calls.filter((c) => c.generated)).toEqual([]);
  });

  it('does not tokenize a streamed prompt that cannot fit the engine’s context; the engine refuses it', async () => {
    rig = await startRig({ engine: 'vllm', maxModelLen: 4096, script: () => ({ text: 'ok' }) }, { mode: 'guard' });
    const long = Array.from({ length: 40_000 }, (_, i) => `line ${i} of a long tool output`).join('\n');
    const a = await post(
      `${rig.url}/v1/chat/completions`,
      { model: MODEL, messages: [{ role: 'user', content: long }], stream: true },
      { 'x-session-id': 'long' },
    );
    expect(a.status).toBe(400);
    const [line] = readCapture(rig.out);
    expect(line!.gateway.notes.join('\n')).toMatch(
      /not predicted: its \d+ characters cannot fit the prompt limit of 4096 tokens/,
    );
  });

  it('tokenizes a long text a piece at a time and stops once it cannot fit', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const text = Array.from({ length: 100_000 }, (_, i) => `word${i} and more`).join('\n');
    const spy = vi.spyOn(profile.tokenizer, 'encode');
    expect(await profile.tokenizer.encodeUpTo(text, 1000)).toBeUndefined();
    const tokenized = spy.mock.calls.reduce((n, [t]) => n + t.length, 0);
    spy.mockRestore();
    expect(tokenized).toBeLessThan(text.length / 10);
    const short = text.slice(0, 3000);
    expect(await profile.tokenizer.encodeUpTo(short, 100_000)).toEqual(await profile.tokenizer.encodeDirect(short));
    const mid = text.slice(0, 200_000);
    expect(await profile.tokenizer.encodeUpTo(mid, 1_000_000)).toEqual(await profile.tokenizer.encodeDirect(mid));
  });
});

describe('kept-alive connections to the engine', () => {
  it('sends a request once more when the engine closed the connection before answering', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'ok' }) });
    const first = await post(
      `${rig.url}/v1/chat/completions`,
      { model: MODEL, messages: question },
      { 'x-session-id': 'r' },
    );
    expect(first.status).toBe(200);
    rig.engine.fail('drop');
    const second = await post(
      `${rig.url}/v1/chat/completions`,
      { model: MODEL, messages: question },
      { 'x-session-id': 'r2' },
    );
    expect(second.status).toBe(200);
    const chats = rig.engine.calls.filter((c) => c.path === '/v1/chat/completions');
    expect(chats.map((c) => c.fault ?? 'answered')).toEqual(['answered', 'drop', 'answered']);
    const metrics = await (await fetch(`${rig.url}/metrics`)).text();
    expect(metrics).toMatch(/rollscope_gateway_upstream_retries_total\{[^}]*\} 1/);
  });

  it('never sends again a request the engine had begun to answer', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'a longer answer' }) });
    await post(`${rig.url}/v1/chat/completions`, { model: MODEL, messages: question }, { 'x-session-id': 'r' });
    rig.engine.fail('reset');
    const a = await post(
      `${rig.url}/v1/chat/completions`,
      { model: MODEL, messages: question },
      { 'x-session-id': 'r2' },
    );
    expect(a.status).toBe(502);
    expect(a.json.error.message).toMatch(/after it began to answer \(not sent again/);
    expect(rig.engine.calls.filter((c) => c.path === '/v1/chat/completions')).toHaveLength(2);
  });
});

describe('streaming continuity', () => {
  it('streams the token-in call and relays its chunks while the engine is still generating', async () => {
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => ({ text: i === 0 ? 'First.' : 'A second answer, streamed.' }) },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const messages: Record<string, unknown>[] = [...question];
    const a1 = await post(url, { model: MODEL, messages }, { 'x-session-id': 'live' });
    messages.push({ role: 'assistant', content: assistantMessage(a1).content }, { role: 'user', content: 'Go on.' });
    const hold = rig.engine.holdStreams();
    const r = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'live' },
      body: JSON.stringify({ model: MODEL, messages, stream: true }),
    });
    const reader = r.body!.getReader();
    let got = '';
    // Content reaches the client while the engine's stream is open (its [DONE] not yet sent).
    while (!/"content":"[^"]+"/.test(got)) {
      const { value, done } = await reader.read();
      if (done) break;
      got += new TextDecoder().decode(value);
    }
    expect(hold.open()).toBe(1);
    expect(got).toMatch(/"content":"A/);
    hold.release();
    while (!(await reader.read()).done);
    const call = rig.engine.calls.filter((c) => c.generated).at(-1)!;
    expect(call.path).toBe('/v1/completions');
    expect((call.body as { stream: boolean }).stream).toBe(true);
  });
});
