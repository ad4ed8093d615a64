// The gateway's pure parts: prompt ids that reuse the previous call's (equal to tokenizing the
// whole text, yet tokenizing only the new part), the canonical continuation (equal to the
// re-alignment `check` and `export` build), tool calls parsed as vLLM's hermes parser does
// (against it, in Python), the per-call check, the capture files, and what counts as a secret.
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { realign } from '../server/analysis/realign.ts';
import { renderText, turnCloseIds, turnStopIds } from '../server/analysis/render.ts';
import { continuationIds, tokenizeExtending } from '../server/gateway/prompt.ts';
import { parseHermesToolCalls } from '../server/families/qwen/hermes.ts';
import { checkCall } from '../server/gateway/guard.ts';
import { CaptureWriter } from '../server/gateway/capture.ts';
import { SessionStore } from '../server/gateway/sessions.ts';
import { isSecretName, withoutSecrets } from '../server/gateway/secrets.ts';
import { CaptureLine } from '../server/gateway/protocol.ts';
import { PythonRenderer } from './support/engine-reference.ts';
import { tempDir } from './support/gateway-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');

describe('prompt ids extending the previous call', () => {
  const pieces = fc.constantFrom(
    'Hello',
    ' world',
    '\n',
    '\n\n',
    ' ',
    'I will',
    '  x',
    '```py\nprint(1)\n```',
    'é',
    '<|im_end|>',
    '  \n',
    '1+1=2',
  );
  const text = fc.array(pieces, { minLength: 1, maxLength: 6 }).map((p) => p.join(''));

  it('equal the whole text tokenized, and tokenize only from the last shared <|im_start|>', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(text, text), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        async (turns, edit) => {
          const messages: Message[] = [];
          let prev: { text: string; ids: number[] } | undefined;
          for (const [i, [user, answer]] of turns.entries()) {
            messages.push({ role: 'user', content: user });
            // An agent that edits the first message halfway (context compression) breaks the reuse there.
            if (edit && i === 2) messages[0] = { role: 'user', content: `${String(messages[0]!.content)} (edited)` };
            const rendered = renderText(profile, messages, { as: 'vllm', addGenerationPrompt: true });
            const got = await tokenizeExtending(profile, prev, rendered);
            expect(got.ids).toEqual(await profile.tokenizer.encodeDirect(rendered));
            if (prev && !(edit && i === 2)) {
              // Only the previous generation prompt onwards: the last answer and the new message.
              const anchor = prev.text.lastIndexOf('<|im_start|>');
              expect(got.tokenizedChars).toBe(rendered.length - anchor);
            }
            prev = { text: got.text, ids: got.ids! };
            messages.push({ role: 'assistant', content: answer });
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('the canonical continuation', () => {
  it("is the re-alignment's stream: previous prompt, generated ids verbatim, the EOS-aware suffix", async () => {
    const closeIds = await turnCloseIds(profile);
    const first: Message[] = [{ role: 'user', content: 'How do you find the hypotenuse?' }];
    const promptIds = await profile.tokenizer.encode(
      renderText(profile, first, { as: 'vllm', addGenerationPrompt: true }),
    );
    for (const generatedIds of [
      [40, 289, 483, 990, 432, 13, qwenNamed(profile.ids).imEnd], // a non-canonical split, ended by the model
      [40, 289, 483, 990], // cut by the length limit: the suffix must close the turn
    ]) {
      const observation: Message[] = [{ role: 'user', content: 'Go on.' }];
      const next = [...first, { role: 'assistant', content: 'I will use' }, ...observation];
      const cont = await continuationIds(profile, {
        last: { promptIds, generatedIds },
        history: first,
        observation,
        tools: undefined,
        templateArgs: {},
        closeIds,
        padCounts: [],
        imagesBefore: 0,
        as: 'vllm',
      });
      if ('unknown' in cont) throw new Error(cont.unknown);
      const traj = {
        id: 't',
        source: { file: 'x', line: 1, format: 'vllm' },
        turns: [
          {
            messages: first,
            promptIds,
            generatedIds,
            finishReason: generatedIds.at(-1) === qwenNamed(profile.ids).imEnd ? 'stop' : 'length',
          },
          { messages: next },
        ],
        images: [],
        limitations: [],
        meta: {},
      } as unknown as Trajectory;
      const alignment = await realign(traj, analysisContext(traj, profile));
      expect(cont.ids).toEqual(alignment.tokens);
    }
  });
});

describe('hermes tool calls', () => {
  const python = new PythonRenderer();
  afterAll(() => python.close());

  it.each([
    'No tool here.',
    'Let me compute.<tool_call>\n{"name": "hypot", "arguments": {"a":3,"b":4.0,"note":"é\\u00e9"}}\n</tool_call>',
    '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": [1, 2e3]}}\n</tool_call>',
    '<tool_call>\n{"name": "open", "arguments": {"path": "/tmp"}}',
    '<tool_call>\n{"name": "broken", "arguments": {\n</tool_call>',
    '<tool_call>\n{"arguments": {"x": 1}}\n</tool_call>',
    'text<tool_call>\n["not", "an object"]\n</tool_call>',
  ])('%j as vLLM parses it', async (text) => {
    const want = await python.hermes(text);
    const got = parseHermesToolCalls(text);
    expect({ content: got.content, calls: got.calls }).toEqual({ content: want.content, calls: want.tool_calls });
  });
});

describe('the per-call check', () => {
  const special = qwenNamed(profile.ids);
  const prompt = (pads: number) => [
    special.imStart,
    872,
    198,
    special.visionStart,
    ...Array(pads).fill(special.imagePad),
    special.visionEnd,
    9,
    special.imEnd,
    198,
    special.imStart,
    77091,
    198,
  ];

  it('finds a pad run of another length than the image gives, and a stated prompt length that disagrees', () => {
    const findings = checkCall(profile, [special.imEnd, 198], {
      turn: 0,
      promptIds: prompt(6),
      statedPromptTokens: prompt(6).length + 3,
      images: [{ key: 'k', padCount: 4 }],
    });
    expect(findings).toMatchObject([
      { kind: 'placeholder_count', index: 4, expected: 4, actual: 6, image: 0 },
      { kind: 'prompt_tokens_mismatch', expected: prompt(6).length, actual: prompt(6).length + 3 },
    ]);
    expect(
      checkCall(profile, [special.imEnd, 198], {
        turn: 0,
        promptIds: prompt(4),
        statedPromptTokens: prompt(4).length,
        images: [{ key: 'k', padCount: 4 }],
      }),
    ).toEqual([]);
  });

  it('reports a dropped image, and checks only the pad runs the previous prompt did not hold', () => {
    const first = prompt(5);
    const generated = [11, special.imEnd];
    const next = [...first, ...generated, 198, special.imStart, 872, 198, 12, special.imEnd, 198];
    const images = [{ key: 'a', padCount: 4 }];
    // The first image's run was the first call's to report; the next call only extends it.
    expect(
      checkCall(profile, [special.imEnd, 198], {
        turn: 1,
        promptIds: next,
        previous: { promptIds: first, generatedIds: generated },
        images,
      }),
    ).toEqual([]);
    const two = [...images, { key: 'b', padCount: 4 }];
    expect(
      checkCall(profile, [special.imEnd, 198], {
        turn: 1,
        promptIds: next,
        previous: { promptIds: first, generatedIds: generated },
        images: two,
      }),
    ).toMatchObject([{ kind: 'image_count', expected: 2, actual: 1 }]);
  });
});

describe('capture files', () => {
  const line = (session: string, n: number): CaptureLine => ({
    session_id: session,
    request: { n, pad: 'x'.repeat(200) },
    response: { choices: [] },
    gateway: {
      version: 1,
      call: `c${n}`,
      replica: 'r',
      time: new Date(0).toISOString(),
      mode: 'record',
      engine: 'vllm',
      endpoint: '/v1/chat/completions',
      upstream: '/v1/chat/completions',
      outcome: 'ok',
      sessionFrom: 'header',
      findings: [],
      notes: [],
      ms: { gateway: 0, upstream: 0 },
    },
  });

  it('rotate by size for new sessions while a session already in a file finishes there', () => {
    const dir = tempDir('gw-capture');
    const w = new CaptureWriter(dir, { replica: 'r', rotateBytes: 1000 });
    const a = w.fileForNewSession();
    for (let n = 0; n < 5; n++) w.write(a, line('a', n));
    const b = w.fileForNewSession();
    expect(b.path).not.toBe(a.path);
    w.write(a, line('a', 5));
    w.write(b, line('b', 0));
    w.release(a);
    expect(w.files()).toEqual([b.path]);
    w.close();
    const read = (f: string) =>
      fs
        .readFileSync(f, 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => CaptureLine.parse(JSON.parse(l)).session_id);
    expect(read(a.path)).toEqual(['a', 'a', 'a', 'a', 'a', 'a']);
    expect(read(b.path)).toEqual(['b']);
    expect(path.basename(a.path)).toMatch(new RegExp(`^gateway-r-${process.pid}-\\d{8}T\\d{6}\\.\\d{3}Z-000\\.jsonl$`));
  });

  it('never reuse a file another writer (a replica, a restart) has created', () => {
    const dir = tempDir('gw-capture');
    const one = new CaptureWriter(dir, { replica: 'r', rotateBytes: 1e9 });
    const two = new CaptureWriter(dir, { replica: 'r', rotateBytes: 1e9 });
    const f1 = one.fileForNewSession();
    const f2 = two.fileForNewSession();
    expect(f1.path).not.toBe(f2.path);
    one.write(f1, line('a', 0));
    two.write(f2, line('b', 0));
    one.close();
    two.close();
    expect(fs.readdirSync(dir)).toHaveLength(2);
  });

  it('refuse a line that is not a capture line', () => {
    const w = new CaptureWriter(tempDir('gw-capture'), { replica: 'r', rotateBytes: 1e9 });
    const f = w.fileForNewSession();
    expect(() => w.write(f, { ...line('a', 0), session_id: '' })).toThrow();
    w.close();
  });
});

describe('secrets', () => {
  it.each([
    'api_key',
    'apiKey',
    'x-api-key',
    'client_secret',
    'password',
    'access_token',
    'authorization',
    'openai_api_key',
  ])('%s is one', (name) => {
    expect(isSecretName(name)).toBe(true);
  });
  it.each(['max_tokens', 'return_token_ids', 'stop_token_ids', 'top_k', 'tokens', 'keywords', 'monkey'])(
    '%s is not',
    (name) => {
      expect(isSecretName(name)).toBe(false);
    },
  );
  it('leave the messages as they are', () => {
    const body = {
      api_key: 'k',
      messages: [{ role: 'user', content: 'my password is x', password: 'kept: content' }],
      extra_body: { token: 1, secret: 's' },
    };
    expect(withoutSecrets(body)).toEqual({ messages: body.messages, extra_body: { token: 1 } });
  });
});

describe('sessions found by their prompt text (completions)', () => {
  /** A store whose sessions are found in a completions prompt where a turn ends with `turnEnds`. */
  const store = (turnEnds?: readonly string[]) =>
    new SessionStore({
      ttlMs: 60_000,
      maxSessions: 10,
      fileFor: () => ({ path: 'capture.jsonl', bytes: 0, sessions: 0 }),
      release: () => {},
      idPrefix: 'r',
      sessionHeader: 'x-session-id',
      now: () => 0,
      ...(turnEnds ? { turnEnds: () => turnEnds } : {}),
    });
  const gemma3 = loadProfile('gemma3');
  const ends = () => turnStopIds(gemma3).map((id) => gemma3.tokenizer.piece(id));
  const first = '<bos><start_of_turn>user\nWhat is 2 + 2?<end_of_turn>\n<start_of_turn>model\n';
  const answer = 'It is 4.';
  const next = `${first}${answer}<end_of_turn>\n<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n`;

  it("a Gemma 3 prompt continues its session where the family's end of turn follows the answer", () => {
    for (const [turnEnds, continues] of [
      [ends(), true],
      // Without the family's stop tokens only `<|…` marks a turn's end, which Gemma 3 never writes.
      [undefined, false],
    ] as const) {
      const s = store(turnEnds);
      const a = s.identify(undefined, undefined, first);
      expect(a.created).toBe(true);
      s.recordTurn(a.session, {
        promptIds: [],
        generatedIds: [1],
        answer: { content: answer, toolCalls: [] },
        text: first,
      });
      const b = s.identify(undefined, undefined, next);
      expect(b.session.id === a.session.id, String(turnEnds)).toBe(continues);
    }
    expect(ends()).toContain('<end_of_turn>');
  });
});
