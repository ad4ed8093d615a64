// Faults and bad input: the engine down, answering 5xx, too slow, or cutting the connection; the
// client going away; the gateway killed mid-run and restarted; bad arguments; credentials. Each
// failed call is a capture line that is not a turn, and the session goes on.
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  captureFiles,
  checkJson,
  exited,
  MODEL,
  post,
  readCapture,
  type Rig,
  rollscope,
  spawnGateway,
  startRig,
  tempDir,
} from './support/gateway-harness.ts';
import { startEngineStandin } from './support/engine-standin.ts';
import { waitFor } from './support/wait.ts';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const question = [{ role: 'user', content: 'Where is the cat?' }];
const chat = (r: Rig, extra: object = {}, headers: Record<string, string> = { 'x-session-id': 's' }) =>
  post(`${r.url}/v1/chat/completions`, { model: MODEL, messages: question, ...extra }, headers);

describe('engine faults', () => {
  it('engine down: 502 naming the upstream, recorded as failed', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'x' }) });
    await rig.engine.close();
    const a = await chat(rig);
    expect(a.status).toBe(502);
    expect(a.json.error.upstream).toBe(rig.engine.url);
    expect(a.json.error.message).toMatch(/cannot connect to the engine \(ECONNREFUSED\)/);
    const [line] = readCapture(rig.out);
    expect(line!.gateway).toMatchObject({ outcome: 'failed', status: 502 });
    expect(line!.gateway.turn).toBeUndefined();
    const models = await fetch(`${rig.url}/v1/models`);
    expect(models.status).toBe(502);
  });

  it.each(['500', '503'] as const)(
    '%s: the engine status and body reach the client; the session goes on',
    async (mode) => {
      rig = await startRig({ engine: 'vllm', script: () => ({ text: 'fine' }) });
      rig.engine.fail(mode);
      const a = await chat(rig);
      expect(a.status).toBe(Number(mode));
      expect(a.json.error.message).toBe('stand-in fault');
      const b = await chat(rig);
      expect(b.status).toBe(200);
      const lines = readCapture(rig.out);
      expect(lines.map((l) => [l.session_id, l.gateway.outcome, l.gateway.turn])).toEqual([
        ['s', 'failed', undefined],
        ['s', 'ok', 0],
      ]);
      // A failed call is no turn for check either: the session is one trajectory of one turn.
      await rig.gateway.close();
      const { status, report } = checkJson([rig.out]);
      expect(status).toBe(0);
      expect(report.errors).toEqual([]);
      expect(report.trajectories.map((t: { id: string }) => t.id)).toEqual(['s']);
    },
  );

  it('timeout: 504 after --upstream-timeout', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'late' }) }, { upstreamTimeoutMs: 300 });
    rig.engine.fail('timeout');
    const a = await chat(rig);
    expect(a.status).toBe(504);
    expect(a.json.error.type).toBe('upstream_timeout');
    expect(readCapture(rig.out)[0]!.gateway).toMatchObject({ outcome: 'failed', status: 504 });
  });

  it('reset: 502, and a stream already under way ends with the error as its last event', async () => {
    rig = await startRig({
      engine: 'vllm',
      script: () => ({ text: 'a longer answer that streams in several chunks' }),
    });
    rig.engine.fail('reset', { count: 2 });
    const a = await chat(rig);
    expect(a.status).toBe(502);
    expect(a.json.error.message).toMatch(/closed the connection/);
    const s = await chat(rig, { stream: true });
    expect(s.status).toBe(200);
    const last = JSON.parse(s.events.at(-1)!);
    expect(last.error.message).toMatch(/closed the connection/);
    expect(readCapture(rig.out).map((l) => l.gateway.outcome)).toEqual(['failed', 'failed']);
  });

  it('client gone: the engine call is abandoned and recorded as cancelled', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'never read' }) });
    const held = rig.engine.hold();
    const gone = new AbortController();
    const pending = fetch(`${rig.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'gone' },
      body: JSON.stringify({ model: MODEL, messages: question, stream: true }),
      signal: gone.signal,
    }).catch((e: Error) => e);
    await held.arrived;
    gone.abort();
    expect(await pending).toBeInstanceOf(Error);
    const line = await waitFor('the cancelled line', () => readCapture(rig!.out)[0]);
    expect(line.gateway).toMatchObject({ outcome: 'cancelled' });
    expect(line.session_id).toBe('gone');
    const metrics = await (await fetch(`${rig.url}/metrics`)).text();
    expect(metrics).toMatch(/rollscope_gateway_calls_total\{[^}]*outcome="cancelled"[^}]*\} 1/);
  });
});

describe('the gateway process', () => {
  it('killed mid-run leaves only whole lines; a restart appends to a new file and says the session was lost', async () => {
    const engine = await startEngineStandin({
      engine: 'vllm',
      model: MODEL,
      script: (_c, i) => ({ text: `Answer ${i}.` }),
    });
    const out = tempDir('gw-kill');
    try {
      const args = ['--upstream', engine.url, '--listen', '127.0.0.1:0', '--out', out, '--mode', 'guard'];
      const first = await spawnGateway(args);
      const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Count.' }];
      const turn = async (url: string) => {
        const a = await post(`${url}/v1/chat/completions`, { model: MODEL, messages }, { 'x-session-id': 'long' });
        expect(a.status).toBe(200);
        messages.push(
          { role: 'assistant', content: a.json.choices[0].message.content },
          { role: 'user', content: 'More.' },
        );
      };
      await turn(first.url);
      await turn(first.url);
      // Calls in flight when it dies: the engine answers slowly, the gateway is killed meanwhile.
      const held = engine.hold(3);
      const inFlight = [0, 1, 2].map((i) =>
        post(
          `${first.url}/v1/chat/completions`,
          { model: MODEL, messages: [{ role: 'user', content: `other ${i}` }] },
          { 'x-session-id': `o${i}` },
        ).catch((e: Error) => e),
      );
      await held.arrived;
      first.child.kill('SIGKILL');
      expect((await exited(first.child)).signal).toBe('SIGKILL');
      await Promise.all(inFlight);
      held.release();
      const [file] = captureFiles(out);
      const text = fs.readFileSync(file!, 'utf8');
      expect(text.endsWith('\n')).toBe(true);
      expect(readCapture(out).map((l) => l.gateway.turn)).toEqual([0, 1]);

      const second = await spawnGateway(args);
      await turn(second.url);
      second.child.kill('SIGTERM');
      expect((await exited(second.child)).code).toBe(0);
      const files = captureFiles(out);
      expect(files).toHaveLength(2);
      expect(fs.readFileSync(file!, 'utf8')).toBe(text);
      const lines = readCapture(out);
      expect(lines.map((l) => [l.session_id, l.gateway.turn])).toEqual([
        ['long', 0],
        ['long', 1],
        ['long', 0],
      ]);
      expect(lines[2]!.gateway.findings).toMatchObject([{ kind: 'session_lost', severity: 'warning' }]);
      const { report } = checkJson([out]);
      expect(report.trajectories.map((t: { id: string }) => t.id)).toEqual(['long', 'long#2']);
    } finally {
      await engine.close();
    }
  });

  it('prints where it listens, and flushes the capture and exits 0 on SIGTERM', async () => {
    const engine = await startEngineStandin({ engine: 'vllm', model: MODEL, script: () => ({ text: 'ok' }) });
    const out = tempDir('gw-term');
    try {
      const g = await spawnGateway([
        '--upstream',
        engine.url,
        '--listen',
        '127.0.0.1:0',
        '--out',
        out,
        '--mode',
        'continuity',
      ]);
      expect(g.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(g.stderr()).toMatch(/continuity mode, vllm at/);
      expect(g.stderr()).toMatch(/takes a token-id prompt without images/);
      // A slow call in flight when SIGTERM arrives is finished and written before the exit.
      const held = engine.hold();
      const pending = post(
        `${g.url}/v1/chat/completions`,
        { model: MODEL, messages: question },
        { 'x-session-id': 't' },
      );
      await held.arrived;
      g.child.kill('SIGTERM');
      // Answered only once the gateway has begun to stop, so the call is one it must finish.
      await waitFor('the gateway to begin stopping', () => /stopping/.test(g.stderr()));
      held.release();
      expect((await pending).status).toBe(200);
      expect((await exited(g.child)).code).toBe(0);
      expect(readCapture(out).map((l) => [l.session_id, l.gateway.outcome])).toEqual([['t', 'ok']]);
    } finally {
      await engine.close();
    }
  });

  it.each([
    [[], /--upstream URL is required/],
    [['--upstream', 'http://127.0.0.1:1'], /--out DIR is required/],
    [['--upstream', 'ftp://x', '--out', 'o'], /--upstream: must be an http/],
    [['--upstream', 'http://127.0.0.1:1', '--out', 'o', '--mode', 'mirror'], /--mode takes record, guard, continuity/],
    [['--upstream', 'http://127.0.0.1:1', '--out', 'o', '--listen', 'nowhere'], /--listen takes HOST:PORT/],
    [
      ['--upstream', 'http://127.0.0.1:1', '--out', 'o', '--listen', '0.0.0.0:0'],
      /--token: listening on 0\.0\.0\.0 .* needs --token/,
    ],
    [
      ['--upstream', 'http://127.0.0.1:1', '--out', 'o', '--upstream-key-env', 'ROLLSCOPE_UNSET_KEY'],
      /environment variable ROLLSCOPE_UNSET_KEY is not set/,
    ],
    [
      ['--upstream', 'http://127.0.0.1:1', '--out', 'o', '--session-ttl', 'soon'],
      /--session-ttl takes a positive whole number/,
    ],
  ])('refuses bad arguments with exit status 2: %j', (args, message) => {
    const r = rollscope(['gateway', ...args]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('has --help', () => {
    const r = rollscope(['gateway', '--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/--on-break B/);
  });
});

describe('security', () => {
  it('beyond loopback, needs the bearer token on every request', async () => {
    rig = await startRig(
      { engine: 'vllm', script: () => ({ text: 'ok' }) },
      { host: '127.0.0.2', token: 'a-long-enough-secret-token' },
    );
    expect(rig.url).toMatch(/^http:\/\/127\.0\.0\.2:/);
    const none = await chat(rig);
    expect(none.status).toBe(401);
    const wrong = await chat(rig, {}, { authorization: 'Bearer nope' });
    expect(wrong.status).toBe(401);
    expect((await fetch(`${rig.url}/metrics`)).status).toBe(401);
    const right = await chat(rig, {}, { authorization: 'Bearer a-long-enough-secret-token', 'x-session-id': 's' });
    expect(right.status).toBe(200);
    // The gateway's token is not the engine's credential.
    expect(rig.engine.calls.find((c) => c.generated)!.headers.authorization).toBeUndefined();
  });

  it('caps request bodies and refuses web pages', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'ok' }) }, { maxBodyBytes: 2000 });
    const big = await chat(rig, { messages: [{ role: 'user', content: 'x'.repeat(5000) }] });
    expect(big.status).toBe(413);
    const page = await chat(rig, {}, { origin: 'https://evil.example', 'x-session-id': 's' });
    expect(page.status).toBe(403);
    expect(rig.engine.calls.filter((c) => c.generated)).toEqual([]);
  });

  it('never captures credentials, and passes the engine its own only when configured', async () => {
    process.env.ROLLSCOPE_TEST_ENGINE_KEY = 'engine-key-123';
    try {
      rig = await startRig(
        { engine: 'vllm', script: () => ({ text: 'ok' }) },
        { upstreamKeyEnv: 'ROLLSCOPE_TEST_ENGINE_KEY' },
      );
      await chat(
        rig,
        { api_key: 'client-key-456', extra_body: { client_secret: 'hush-789', max_tokens: 5 } },
        { authorization: 'Bearer client-auth-000', 'x-session-id': 's' },
      );
      const gen = rig.engine.calls.find((c) => c.generated)!;
      expect(gen.headers.authorization).toBe('Bearer engine-key-123');
      const text = fs.readFileSync(captureFiles(rig.out)[0]!, 'utf8');
      for (const secret of ['client-key-456', 'hush-789', 'client-auth-000', 'engine-key-123'])
        expect(text).not.toContain(secret);
      expect(readCapture(rig.out)[0]!.request.extra_body).toEqual({ max_tokens: 5 });
      await rig.close();
      rig = await startRig({ engine: 'vllm', script: () => ({ text: 'ok' }) }, { forwardAuth: true });
      await chat(rig, {}, { authorization: 'Bearer client-auth-000', 'x-session-id': 's' });
      expect(rig.engine.calls.find((c) => c.generated)!.headers.authorization).toBe('Bearer client-auth-000');
      expect(fs.readFileSync(captureFiles(rig.out)[0]!, 'utf8')).not.toContain('client-auth-000');
    } finally {
      delete process.env.ROLLSCOPE_TEST_ENGINE_KEY;
    }
  });
});
