// One gateway: sessions, the capture, the engine, and what happens to each call (docs/gateway.md).
// record: the engine renders and returns its ids; guard: record, and each call checked against
// its session's previous turn; continuity: the gateway builds the prompt ids itself (previous
// prompt ⧺ generated ids ⧺ the canonical suffix of the new messages, continuity.ts) and sends ids,
// falling back to the engine's rendering, checked, where it cannot (and saying why in the capture
// and on /metrics). Chat and completions calls go through one lifecycle (`call`): the session,
// the plan, the prediction a check needs before the answer, the exchange with the engine (whole or
// streamed), the checks on the engine's ids, the capture line, the session's next state.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Finding } from '../model/finding.ts';
import type { Message } from '../model/trajectory.ts';
import { profileFor, type ModelProfile } from '../profiles/profile.ts';
import { turnCloseIds, turnStopIds } from '../analysis/render.ts';
import { commonPrefixLength } from '../analysis/diff.ts';
import type { GatewayConfig } from './config.ts';
import { CaptureWriter } from './capture.ts';
import { conversationKeys, SessionStore, type AnsweredToolCall, type Session, type SessionSource } from './sessions.ts';
import { GatewayMetrics } from './metrics.ts';
import { ENGINES, type EngineAdapter, type EngineAnswer, type TokenInRequest } from './engines.ts';
import { conversationImages, processorSettingsOf } from './images.ts';
import { expandPads, renderChatPrompt, tokenizeExtending, type TextTokens } from './prompt.ts';
import { planContinuity, type ContinuityPlan, type FallbackReason } from './continuity.ts';
import { checkCall } from './guard.ts';
import {
  type ChatOutcome,
  chatChunks,
  chatFromTokenIn,
  type ClientAsked,
  clientAsked,
  completionChunks,
  RelayedStream,
  stripAnswer,
  TokenInChatStream,
  tokenInOutcome,
  type ToolReader,
} from './answer.ts';
import { getRaw, postJson, postSse, UpstreamAgents, UpstreamError, type UpstreamOptions } from './upstream.ts';
import type { CallOutcome, CaptureLine, ChatRequest, CompletionRequest } from './protocol.ts';
import { withoutSecrets } from './secrets.ts';

export const FINDINGS_HEADER = 'x-rollscope-findings';

/** A call's answer to the client: JSON, or server-sent events. */
export type ClientReply =
  | { kind: 'json'; status: number; body: unknown; findings: number }
  | { kind: 'sse'; events: string[]; findings: number };

/** Where a streamed answer goes while it is read from the engine. */
export interface StreamSink {
  start(findings: number): void;
  event(data: string): void;
  end(findings: number): void;
}

/** A client call: the endpoint and its request. */
type ClientCall = { kind: 'chat'; body: ChatRequest } | { kind: 'completion'; body: CompletionRequest };

const ENDPOINT = { chat: '/v1/chat/completions', completion: '/v1/completions' } as const;

interface CallContext {
  id: string;
  started: number;
  upstreamMs: number;
  endpoint: string;
  upstreamPath: string;
  session: Session;
  sessionFrom: SessionSource;
  notes: string[];
  findings: Finding[];
  prompt?: string;
  fallback?: { reason: FallbackReason; detail: string };
}

/** What the exchange with the engine gave: the answer, and the client's reply unless it was streamed already. */
interface Exchanged {
  answer: EngineAnswer;
  reply?: ClientReply;
  streamed?: StreamSink;
  /** The request as the capture writes it (a token-in call adds the ids it sent). */
  captured: Record<string, unknown>;
}

function replicaName(config: GatewayConfig): string {
  return (
    config.replica ??
    (os
      .hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 64) ||
      'gateway')
  );
}

/** A request asked of the engine as a whole answer (vLLM refuses stream_options without a stream). */
function whole<T extends { stream?: boolean | null; stream_options?: unknown }>(body: T): T {
  const { stream_options: _, ...rest } = body;
  return { ...rest, stream: false } as T;
}

/** A streamed request that also asks for the usage chunk (taken out again unless the client asked). */
function streamed<T extends { stream_options?: { include_usage?: boolean | null } | null }>(body: T): T {
  return { ...body, stream: true, stream_options: { ...(body.stream_options ?? {}), include_usage: true } };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && commonPrefixLength(a, b) === a.length;
}

export class Gateway {
  readonly capture: CaptureWriter;
  readonly sessions: SessionStore;
  readonly metrics: GatewayMetrics;
  readonly replica: string;
  private readonly engine: EngineAdapter;
  private readonly agents = new UpstreamAgents();
  private profile: ModelProfile;
  private closeIds: number[] = [];
  private servedModel: string | undefined;
  private maxModelLen: number | undefined;
  /** The engine answered with reasoning split from the content: it runs a reasoning parser continuity does not reproduce. */
  private reasoningSplit = false;
  private readonly upstreamHeaders: Record<string, string>;

  /** A free tool call read with the model family's parser as the engine runs it. */
  private get toolReader(): ToolReader {
    return { parser: this.profile.modelFamily.toolCalls, engine: this.engine.toolParser };
  }

  /** `clock.now`: the time sessions expire by (tests pass a clock they move instead of sleeping). */
  constructor(
    readonly config: GatewayConfig,
    clock: { now?: () => number } = {},
  ) {
    this.replica = replicaName(config);
    this.engine = ENGINES[config.engine];
    this.capture = new CaptureWriter(config.out, { replica: this.replica, rotateBytes: config.rotateBytes });
    this.sessions = new SessionStore({
      ttlMs: config.sessionTtlMs,
      maxSessions: config.maxSessions,
      fileFor: () => this.capture.fileForNewSession(),
      release: (f) => this.capture.release(f),
      idPrefix: this.replica,
      sessionHeader: config.sessionHeader,
      turnEnds: () => turnStopIds(this.profile).map((id) => this.profile.tokenizer.piece(id)),
      ...(clock.now ? { now: clock.now } : {}),
    });
    this.metrics = new GatewayMetrics({ replica: this.replica, engine: config.engine }, () => ({
      open: this.sessions.size,
      evicted: this.sessions.evicted,
    }));
    this.profile = profileFor(config.model, undefined);
    const key = config.upstreamKeyEnv ? process.env[config.upstreamKeyEnv] : undefined;
    this.upstreamHeaders = key ? { authorization: `Bearer ${key}` } : {};
  }

  /** Learn the served model (and its context length) and the profile; the engine may still be down. */
  async start(): Promise<string[]> {
    const notes: string[] = [];
    try {
      const got = await getRaw(this.upstreamOptions({}, undefined), '/v1/models');
      const data = (JSON.parse(got.body) as { data?: { id?: unknown; max_model_len?: unknown }[] }).data?.[0];
      if (typeof data?.id === 'string') this.servedModel = data.id;
      if (typeof data?.max_model_len === 'number') this.maxModelLen = data.max_model_len;
    } catch (e) {
      notes.push(
        `the engine did not list its models (${(e as Error).message}); the profile is ${this.config.model ? 'as given' : 'the default'} until it does`,
      );
    }
    this.profile = profileFor(this.config.model, this.servedModel);
    this.closeIds = await turnCloseIds(this.profile);
    if (this.config.mode === 'continuity')
      notes.push(`continuity with ${this.config.engine}: ${this.engine.imagesWithIds}`);
    const limit = this.promptLimit();
    notes.push(
      limit === undefined
        ? 'no prompt limit known (the engine listed no max_model_len and --max-prompt-tokens is not set): prompts the gateway predicts are tokenized whole'
        : `prompts over ${limit} tokens are not tokenized by the gateway (${this.config.maxPromptTokens !== undefined ? '--max-prompt-tokens' : "the engine's max_model_len"})`,
    );
    return notes;
  }

  get profileName(): string {
    return this.profile.name;
  }

  /** Flush and close the capture and drop the engine connections (after the last call finished). */
  close(): void {
    this.sessions.clear();
    this.capture.close();
    this.agents.destroy();
  }

  /** The most prompt tokens the gateway tokenizes: --max-prompt-tokens, else the engine's max_model_len. */
  private promptLimit(): number | undefined {
    const limits = [this.config.maxPromptTokens, this.maxModelLen].filter((n): n is number => n !== undefined);
    return limits.length > 0 ? Math.min(...limits) : undefined;
  }

  /** `GET /v1/models` and the like, passed through. */
  async passThrough(path: string, signal: AbortSignal): Promise<ClientReply> {
    try {
      const got = await getRaw(this.upstreamOptions({}, signal), path);
      let body: unknown;
      try {
        body = got.body === '' ? {} : JSON.parse(got.body);
      } catch {
        body = { error: { message: got.body.slice(0, 2000) } };
      }
      return { kind: 'json', status: got.status, body, findings: 0 };
    } catch (e) {
      const err = e instanceof UpstreamError ? e : new UpstreamError('unreachable', 502, (e as Error).message);
      return { kind: 'json', status: err.status, body: err.clientBody(this.config.upstream), findings: 0 };
    }
  }

  /** `GET /v1/models`, passed through. */
  models(signal: AbortSignal): Promise<ClientReply> {
    return this.passThrough('/v1/models', signal);
  }

  /** The engine's own health (`GET /health`): its status, or why it could not be asked. */
  async engineHealth(signal: AbortSignal): Promise<{ ok: boolean; status?: number; error?: string }> {
    try {
      const got = await getRaw({ ...this.upstreamOptions({}, signal), timeoutMs: 5000 }, '/health');
      return { ok: got.status === 200, status: got.status };
    } catch (e) {
      return { ok: false, error: (e as Error).message };
    }
  }

  /** `GET /rollscope/sessions/ID`. */
  sessionView(id: string): Record<string, unknown> | undefined {
    const s = this.sessions.get(id);
    if (!s) return undefined;
    return {
      id: s.id,
      from: s.from,
      mode: this.config.mode,
      replica: this.replica,
      file: s.file.path,
      turns: s.turns,
      calls: s.calls,
      created: new Date(s.created).toISOString(),
      lastUsed: new Date(s.lastUsed).toISOString(),
      promptTokens: s.last?.promptIds.length ?? 0,
      generatedTokens: s.last?.generatedIds.length ?? 0,
      images: s.images.map((i) => ({ padCount: i.padCount ?? null, problem: i.problem ?? null })),
      findings: s.findings,
    };
  }

  private upstreamOptions(
    headers: http.IncomingHttpHeaders,
    signal: AbortSignal | undefined,
    session?: string,
  ): UpstreamOptions {
    const h: Record<string, string> = { ...this.upstreamHeaders };
    if (this.config.forwardAuth && typeof headers.authorization === 'string') h.authorization = headers.authorization;
    if (session) h[this.config.sessionHeader] = session;
    return {
      base: this.config.upstream,
      timeoutMs: this.config.upstreamTimeoutMs,
      headers: h,
      agents: this.agents,
      onRetry: () => this.metrics.retries.inc(),
      ...(signal ? { signal } : {}),
    };
  }

  private explicitSession(
    headers: http.IncomingHttpHeaders,
    body: { session_id?: string | null; user?: string | null },
  ): { id: string; from: SessionSource } | undefined {
    const h = headers[this.config.sessionHeader];
    const header = Array.isArray(h) ? h[0] : h;
    if (header) return { id: header, from: 'header' };
    if (body.session_id) return { id: body.session_id, from: 'session_id' };
    if (body.user) return { id: body.user, from: 'user' };
    return undefined;
  }

  /** `POST /v1/chat/completions`; `started`: when the request arrived (its body's reading is the gateway's own time too). */
  chat(
    headers: http.IncomingHttpHeaders,
    body: ChatRequest,
    signal: AbortSignal,
    sink: () => StreamSink,
    started = performance.now(),
  ): Promise<ClientReply | undefined> {
    return this.call({ kind: 'chat', body }, headers, signal, sink, started);
  }

  /** `POST /v1/completions`: the client's prompt, passed through (recorded and checked) in every mode. */
  completion(
    headers: http.IncomingHttpHeaders,
    body: CompletionRequest,
    signal: AbortSignal,
    sink: () => StreamSink,
    started = performance.now(),
  ): Promise<ClientReply | undefined> {
    return this.call({ kind: 'completion', body }, headers, signal, sink, started);
  }

  // --- the lifecycle -------------------------------------------------------------------------------

  private async call(
    call: ClientCall,
    headers: http.IncomingHttpHeaders,
    signal: AbortSignal,
    sink: () => StreamSink,
    started: number,
  ): Promise<ClientReply | undefined> {
    const { config, profile } = this;
    const chat = call.kind === 'chat' ? call.body : undefined;
    const body = call.body;
    const promptText =
      call.kind === 'completion' && typeof call.body.prompt === 'string' ? call.body.prompt : undefined;
    const identified = this.sessions.identify(this.explicitSession(headers, body), chat?.messages, promptText);
    const session = identified.session;
    session.calls++;
    const ctx: CallContext = {
      id: randomUUID(),
      started,
      upstreamMs: 0,
      endpoint: ENDPOINT[call.kind],
      upstreamPath: ENDPOINT[call.kind],
      session,
      sessionFrom: session.from,
      notes: [],
      findings: [...identified.findings],
    };
    const turn = session.turns;
    const last = session.last;
    const asked = clientAsked(body);
    const images = chat ? await this.imagesOf(chat, session, ctx) : [];
    const padCounts = images.map((i) => i.padCount);
    // Continuity compares the messages with the previous call's; the other modes need no keys.
    const keys = chat && config.mode === 'continuity' ? conversationKeys(chat.messages) : [];
    if ((body.n ?? 1) > 1) ctx.notes.push(`n=${body.n}: every choice is captured; the session continues with choice 0`);

    // Continuity: the canonical next prompt, where it can be built and sent with every field's meaning.
    let plan: ContinuityPlan | undefined;
    if (chat && config.mode === 'continuity') {
      plan = await planContinuity({
        profile,
        engineKind: config.engine,
        engine: this.engine,
        body: chat,
        last,
        keys,
        padCounts,
        closeIds: this.closeIds,
        maxModelLen: this.maxModelLen,
        sessionId: session.id,
        imagesKeepIds: config.sglangKeepsImageIds,
        reasoningSplit: this.reasoningSplit,
      });
      if (plan.kind === 'fallback') {
        ctx.prompt = `rendered by the engine: ${plan.detail}`;
        ctx.fallback = { reason: plan.reason, detail: plan.detail };
        this.metrics.fallbacks.inc({ reason: plan.reason });
      } else {
        this.metrics.tokenizedChars.inc(plan.suffixChars);
        ctx.prompt = plan.description;
        if (images.length > 0)
          ctx.notes.push(
            'sent as ids with images: the engine is trusted to keep them (--sglang-keeps-image-ids); usage.prompt_tokens is compared',
          );
      }
    }
    const tokenIn = plan?.kind === 'ids' ? plan.request : undefined;

    // The prompt the engine will render, predicted where a check must come before the answer.
    const { predicted, textState } = tokenIn
      ? { predicted: undefined, textState: undefined }
      : await this.predict(call, last, padCounts, ctx);
    const early = predicted
      ? checkCall(profile, this.closeIds, { turn, promptIds: predicted, previous: last, images })
      : [];
    const refused = this.refuseOnBreak(ctx, body, early);
    if (refused) return refused;

    const upstream = this.upstreamOptions(headers, signal, session.id);
    const asks = Date.now();
    let done: Exchanged;
    try {
      done = tokenIn
        ? await this.exchangeTokenIn(call.body as ChatRequest, tokenIn, asked, upstream, sink, ctx, early.length)
        : await this.exchangeEngine(call, asked, upstream, sink, ctx.findings.length + early.length, ctx);
    } catch (e) {
      ctx.upstreamMs = Date.now() - asks;
      return this.failed(ctx, body, e);
    }
    ctx.upstreamMs = Date.now() - asks;
    const { answer } = done;
    if (!tokenIn && chat && answer.choices.some((c) => c.reasoning)) this.reasoningSplit = true;
    const findings = this.afterAnswer(ctx, turn, answer, tokenIn, predicted, images, last);
    this.finish(ctx, 'ok', done.captured, answer.capture, findings);
    this.remember(session, ctx, turn, answer, chat, keys, images, textState, promptText);
    if (done.streamed) {
      done.streamed.end(findings.length);
      return undefined;
    }
    return { ...done.reply!, findings: findings.length };
  }

  private async imagesOf(chat: ChatRequest, session: Session, ctx: CallContext): Promise<Session['images']> {
    const images = await conversationImages(
      chat.messages,
      this.profile,
      processorSettingsOf(chat.mm_processor_kwargs),
      session.images,
      {
        roots: this.config.imageRoots.length > 0 ? this.config.imageRoots : [process.cwd()],
        baseDir: process.cwd(),
        allowRemote: this.config.allowRemoteImages,
      },
    );
    images.forEach((img, i) => {
      if (img.problem && i >= session.images.length)
        ctx.notes.push(`image ${i}: ${img.problem}; its pad run is not checked`);
    });
    return images;
  }

  /**
   * The prompt ids a check before the answer needs (`--on-break refuse`, or a stream whose header
   * carries the findings): the chat template's render or the completions prompt, tokenized past
   * what the session's previous call already holds, and never past the prompt limit.
   */
  private async predict(
    call: ClientCall,
    last: Session['last'],
    padCounts: readonly (number | undefined)[],
    ctx: CallContext,
  ): Promise<{ predicted?: number[]; textState?: TextTokens }> {
    const checks = this.config.mode !== 'record';
    if (!checks || !(this.config.onBreak === 'refuse' || call.body.stream)) return {};
    const limit = this.promptLimit();
    // A prompt whose text alone cannot fit (each token spells at most a few bytes) is not even rendered.
    const chars =
      call.kind === 'completion'
        ? typeof call.body.prompt === 'string'
          ? call.body.prompt.length
          : 0
        : textLength(call.body.messages);
    if (limit !== undefined && chars > limit && chars > (limit + 1) * this.profile.tokenizer.maxPieceBytes()) {
      ctx.notes.push(
        `the prompt was not predicted: its ${chars} characters cannot fit the prompt limit of ${limit} tokens (the engine decides)`,
      );
      return {};
    }
    let text: string;
    if (call.kind === 'completion') {
      if (typeof call.body.prompt !== 'string') return { predicted: call.body.prompt };
      text = call.body.prompt;
    } else {
      const rendered = renderChatPrompt(this.profile, call.body, this.config.engine);
      if ('unknown' in rendered) {
        ctx.notes.push(`the prompt was not predicted: ${rendered.unknown}`);
        return {};
      }
      text = rendered.text;
    }
    const got = await tokenizeExtending(
      this.profile,
      last?.text !== undefined && last.textIds ? { text: last.text, ids: last.textIds } : undefined,
      text,
      limit,
    );
    this.metrics.tokenizedChars.inc(got.tokenizedChars);
    if (!got.ids) {
      ctx.notes.push(
        `the prompt was not predicted: its ${text.length} characters cannot fit the prompt limit of ${limit} tokens (the engine decides)`,
      );
      return {};
    }
    const textState = { text, ids: got.ids };
    return {
      predicted: call.kind === 'chat' ? await expandPads(this.profile, textState, padCounts) : got.ids,
      textState,
    };
  }

  /** The engine renders (record, guard, a continuity fallback): its chat or completions endpoint, streamed where it streams ids. */
  private async exchangeEngine(
    call: ClientCall,
    asked: ClientAsked,
    upstream: UpstreamOptions,
    sink: () => StreamSink,
    findingsSoFar: number,
    ctx: CallContext,
  ): Promise<Exchanged> {
    const path = ENDPOINT[call.kind];
    const request =
      call.kind === 'chat'
        ? (b: ChatRequest) => this.engine.chatBody(b)
        : (b: CompletionRequest) => this.engine.completionBody(b);
    const read = (raw: unknown) => (call.kind === 'chat' ? this.engine.readChat(raw) : this.engine.readCompletion(raw));
    const body = call.body;
    if (body.stream && this.engine.streamsChatIds) {
      const relayed = new RelayedStream(asked);
      const out = sink();
      await relay(
        postSse(upstream, path, (request as (b: typeof body) => unknown)(streamed(body))),
        out,
        findingsSoFar,
        (d) => {
          const forward = relayed.take(d);
          return forward === undefined ? [] : [forward];
        },
      );
      ctx.upstreamPath = path;
      return { answer: read(relayed.fold.response()), streamed: out, captured: body };
    }
    const raw = (await postJson(upstream, path, (request as (b: typeof body) => unknown)(whole(body)))) as Record<
      string,
      unknown
    >;
    const answer = read(raw);
    const client = stripAnswer(raw, asked, this.engine.unasked);
    const reply: ClientReply = body.stream
      ? {
          kind: 'sse',
          events: call.kind === 'chat' ? chatChunks(client, asked) : completionChunks(client, asked),
          findings: 0,
        }
      : { kind: 'json', status: 200, body: client, findings: 0 };
    return { answer, reply, captured: body };
  }

  /** Continuity: the ids go to the token-in endpoint, the answer comes back in the chat shape, streamed as it comes where the engine streams it. */
  private async exchangeTokenIn(
    body: ChatRequest,
    tokenIn: TokenInRequest,
    asked: ClientAsked,
    upstream: UpstreamOptions,
    sink: () => StreamSink,
    ctx: CallContext,
    early: number,
  ): Promise<Exchanged> {
    const route = this.engine.tokenIn(tokenIn);
    if ('unsupported' in route) throw new UpstreamError('bad_response', 502, route.unsupported);
    ctx.upstreamPath = route.path;
    const model = body.model ?? this.servedModel ?? this.profile.name;
    const decode = (id: number) => this.profile.tokenizer.decodeSync([id]);
    const captured = { ...body, prompt: tokenIn.promptIds };
    const outcome = (c: EngineAnswer['choices'][number]): ChatOutcome =>
      tokenInOutcome(c, tokenIn.tools, this.toolReader, tokenIn.parallelToolCalls);
    let answer: EngineAnswer;
    let outcomes: ChatOutcome[];
    let reply: ClientReply | undefined;
    let out: StreamSink | undefined;
    if (route.streams) {
      const stream = new TokenInChatStream(
        asked,
        tokenIn.tools,
        this.toolReader,
        tokenIn.parallelToolCalls,
        model,
        decode,
      );
      out = sink();
      await relay(postSse(upstream, route.path, route.body), out, ctx.findings.length + early, (d) => stream.take(d));
      answer = this.engine.readTokenIn(stream.fold.response(), tokenIn);
      outcomes = answer.choices.map((c) => stream.outcomes.get(c.index) ?? outcome(c));
    } else {
      const raw = await postJson(upstream, route.path, route.body);
      answer = this.engine.readTokenIn(raw, tokenIn);
      outcomes = answer.choices.map(outcome);
      const client = chatFromTokenIn(answer, outcomes, asked, model, decode);
      reply = body.stream
        ? { kind: 'sse', events: chatChunks(client, asked), findings: 0 }
        : { kind: 'json', status: 200, body: client, findings: 0 };
    }
    // The session goes on with choice 0 as the client received it.
    answer.toolCalls = outcomes[0]?.toolCalls ?? [];
    answer.text = outcomes[0]?.content ?? null;
    return { answer, captured, ...(reply ? { reply } : {}), ...(out ? { streamed: out } : {}) };
  }

  /** The checks on the engine's own ids (the truth the capture holds), and notes on what differs. */
  private afterAnswer(
    ctx: CallContext,
    turn: number,
    answer: EngineAnswer,
    tokenIn: TokenInRequest | undefined,
    predicted: number[] | undefined,
    images: Session['images'],
    last: Session['last'],
  ): Finding[] {
    if (!answer.promptIds && tokenIn) answer.promptIds = tokenIn.promptIds;
    if (!answer.promptIds)
      ctx.notes.push('the engine returned no prompt ids (return_token_ids needs vLLM >= 0.10.2): nothing to check');
    if (!answer.generatedIds)
      ctx.notes.push('the engine returned no generated ids: the next call cannot be checked against this one');
    if (tokenIn && answer.promptIds && !sameIds(answer.promptIds, tokenIn.promptIds))
      ctx.notes.push(
        `the engine reports other prompt ids than the gateway sent (from token ${commonPrefixLength(answer.promptIds, tokenIn.promptIds)})`,
      );
    if (predicted && answer.promptIds && !sameIds(predicted, answer.promptIds))
      ctx.notes.push(
        `the engine's prompt differs from the profile's render from token ${commonPrefixLength(predicted, answer.promptIds)} (another chat template or tokenizer on the engine?)`,
      );
    if (this.config.mode !== 'record' && answer.promptIds) {
      ctx.findings.push(
        ...checkCall(this.profile, this.closeIds, {
          turn,
          promptIds: answer.promptIds,
          ...(answer.promptTokens !== undefined ? { statedPromptTokens: answer.promptTokens } : {}),
          previous: last,
          images,
        }),
      );
    }
    return ctx.findings;
  }

  private remember(
    session: Session,
    ctx: CallContext,
    turn: number,
    answer: EngineAnswer,
    chat: ChatRequest | undefined,
    keys: string[],
    images: Session['images'],
    textState: TextTokens | undefined,
    promptText: string | undefined,
  ): void {
    const toolCalls: AnsweredToolCall[] = answer.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }));
    this.sessions.recordTurn(session, {
      promptIds: answer.promptIds ?? [],
      generatedIds: answer.generatedIds ?? [],
      ...(answer.finishReason ? { finishReason: answer.finishReason } : {}),
      ...(chat
        ? {
            messages: chat.messages as Message[],
            ...(keys.length > 0 ? { messageKeys: keys } : {}),
            tools: chat.tools ?? undefined,
          }
        : {}),
      answer: { content: answer.text, toolCalls },
      ...(textState
        ? { text: textState.text, textIds: textState.ids }
        : promptText !== undefined
          ? { text: promptText }
          : {}),
    });
    // Only continuity renders after the history: the other modes keep no messages (they can be long).
    if (this.config.mode !== 'continuity' && session.last) session.last.messages = undefined;
    session.images = images;
    this.sessions.addFindings(session, ctx.id, turn, ctx.findings);
  }

  private failed(ctx: CallContext, request: Record<string, unknown>, e: unknown): ClientReply | undefined {
    const err = e instanceof UpstreamError ? e : new UpstreamError('bad_response', 502, (e as Error).message);
    const cancelled = err.failure === 'cancelled';
    ctx.notes.push(err.message);
    this.finish(
      ctx,
      cancelled ? 'cancelled' : 'failed',
      request,
      {
        object: 'error',
        error: {
          message: err.message,
          type: err.failure,
          code: err.status,
          ...(err.body !== undefined ? { engine: err.body } : {}),
        },
      },
      ctx.findings,
      err.status,
    );
    if (cancelled) return undefined;
    return {
      kind: 'json',
      status: err.status,
      body: err.clientBody(this.config.upstream),
      findings: ctx.findings.length,
    };
  }

  /** With `--on-break refuse`, a call whose predicted prompt breaks is answered 409 with the findings, never forwarded. */
  private refuseOnBreak(
    ctx: CallContext,
    body: ChatRequest | CompletionRequest,
    early: Finding[],
  ): ClientReply | undefined {
    if (this.config.onBreak !== 'refuse' || !early.some((f) => f.severity === 'error')) return undefined;
    const all = [...ctx.findings, ...early];
    this.finish(
      ctx,
      'refused',
      body,
      { object: 'error', error: { type: 'rollscope_break', findings: early } },
      all,
      409,
    );
    return {
      kind: 'json',
      status: 409,
      body: { error: { type: 'rollscope_break', message: early[0]!.message, findings: early } },
      findings: all.length,
    };
  }

  /** Write the capture line and count the call. */
  private finish(
    ctx: CallContext,
    outcome: CallOutcome,
    request: Record<string, unknown>,
    response: Record<string, unknown>,
    findings: Finding[],
    status?: number,
  ): void {
    const own = Math.max(0, performance.now() - ctx.started - ctx.upstreamMs);
    const turn = outcome === 'ok' ? ctx.session.turns : undefined;
    const line: CaptureLine = {
      session_id: ctx.session.id,
      request: withoutSecrets(request),
      response,
      gateway: {
        version: 1,
        call: ctx.id,
        replica: this.replica,
        time: new Date().toISOString(),
        mode: this.config.mode,
        engine: this.config.engine,
        endpoint: ctx.endpoint,
        upstream: ctx.upstreamPath,
        outcome,
        ...(turn !== undefined ? { turn } : {}),
        sessionFrom: ctx.sessionFrom,
        ...(ctx.prompt ? { prompt: ctx.prompt } : {}),
        ...(ctx.fallback ? { fallback: ctx.fallback } : {}),
        findings,
        notes: ctx.notes,
        ...(status !== undefined ? { status } : {}),
        ms: { gateway: Math.round(own * 1000) / 1000, upstream: ctx.upstreamMs },
      },
    };
    this.capture.write(ctx.session.file, line);
    this.metrics.calls.inc({ endpoint: ctx.endpoint, outcome, mode: this.config.mode });
    this.metrics.countFindings(findings.map((f) => f.kind));
    this.metrics.own.observe({ endpoint: ctx.endpoint }, (performance.now() - ctx.started - ctx.upstreamMs) / 1000);
    if (ctx.upstreamMs > 0) this.metrics.upstream.observe({ endpoint: ctx.endpoint }, ctx.upstreamMs / 1000);
  }
}

export type { ClientAsked };

/** Characters of text in messages (their string contents and text parts), a lower bound of the prompt's bytes. */
function textLength(messages: readonly unknown[]): number {
  let n = 0;
  const walk = (v: unknown, depth: number): void => {
    if (typeof v === 'string') n += v.length;
    else if (depth < 8 && Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (depth < 8 && v && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) if (k !== 'image_url' && k !== 'url') walk(x, depth + 1);
  };
  walk(messages, 0);
  return n;
}

/**
 * Relay an engine's stream to the client event by event (each engine event becomes zero or more
 * client events); the client's stream starts (with the findings known so far) at the first event,
 * or at the end.
 */
async function relay(
  events: AsyncGenerator<string>,
  out: StreamSink,
  findingsSoFar: number,
  convert: (data: string) => string[],
): Promise<void> {
  let begun = false;
  for await (const data of events) {
    if (!begun) {
      out.start(findingsSoFar);
      begun = true;
    }
    for (const e of convert(data)) out.event(e);
  }
  if (!begun) out.start(findingsSoFar);
}
