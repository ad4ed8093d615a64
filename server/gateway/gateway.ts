// One gateway: sessions, the capture, the engine, and what happens to each call (docs/gateway.md).
// record: the engine renders and returns its ids; guard: record, and each call checked against
// its session's previous turn; continuity: the gateway builds the prompt ids itself (previous
// prompt ⧺ generated ids ⧺ the canonical suffix of the new messages) and sends ids, falling back
// to the engine's rendering, checked, where it cannot (and saying why in the capture).
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Finding } from '../model/finding.ts';
import type { Message } from '../model/trajectory.ts';
import { imagesInMessages } from '../model/message-images.ts';
import { profileFor, type ModelProfile } from '../profiles/profile.ts';
import { turnCloseIds } from '../analysis/render.ts';
import { commonPrefixLength } from '../analysis/diff.ts';
import { collapseRuns } from '../import/chain.ts';
import { padIdsOf } from '../analysis/vision-spans.ts';
import type { GatewayConfig } from './config.ts';
import { CaptureWriter } from './capture.ts';
import {
  answerKey,
  conversationKeys,
  SessionStore,
  type AnsweredToolCall,
  type Session,
  type SessionSource,
} from './sessions.ts';
import { GatewayMetrics } from './metrics.ts';
import { ENGINES, CARRIED_SAMPLING, type EngineAdapter, type EngineAnswer, type TokenInRequest } from './engines.ts';
import { conversationImages, processorSettingsOf } from './images.ts';
import { continuationIds, expandPads, renderChatPrompt, tokenizeExtending, type TextTokens } from './prompt.ts';
import { checkCall } from './guard.ts';
import {
  chatChunks,
  chatFromTokenIn,
  chatOutcome,
  clientAsked,
  completionChunks,
  StreamFold,
  stripAnswer,
  type ClientAsked,
} from './answer.ts';
import { getRaw, postJson, postSse, UpstreamError, type UpstreamOptions } from './upstream.ts';
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
  private profile: ModelProfile;
  private closeIds: number[] = [];
  private servedModel: string | undefined;
  private maxModelLen: number | undefined;
  private readonly upstreamHeaders: Record<string, string>;

  constructor(readonly config: GatewayConfig) {
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
    return notes;
  }

  get profileName(): string {
    return this.profile.name;
  }

  close(): void {
    this.sessions.clear();
    this.capture.close();
  }

  /** `GET /v1/models`, passed through. */
  async models(signal: AbortSignal): Promise<ClientReply> {
    try {
      const got = await getRaw(this.upstreamOptions({}, signal), '/v1/models');
      let body: unknown;
      try {
        body = JSON.parse(got.body);
      } catch {
        body = { error: { message: got.body.slice(0, 2000) } };
      }
      return { kind: 'json', status: got.status, body, findings: 0 };
    } catch (e) {
      const err = e instanceof UpstreamError ? e : new UpstreamError('unreachable', 502, (e as Error).message);
      return { kind: 'json', status: err.status, body: err.clientBody(this.config.upstream), findings: 0 };
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

  // --- chat --------------------------------------------------------------------------------------

  /** `started`: when the request arrived (its body's reading is the gateway's own time too). */
  async chat(
    headers: http.IncomingHttpHeaders,
    body: ChatRequest,
    signal: AbortSignal,
    sink: () => StreamSink,
    started = performance.now(),
  ): Promise<ClientReply | undefined> {
    const identified = this.sessions.identify(this.explicitSession(headers, body), body.messages);
    const session = identified.session;
    session.calls++;
    const ctx: CallContext = {
      id: randomUUID(),
      started,
      upstreamMs: 0,
      endpoint: '/v1/chat/completions',
      upstreamPath: '/v1/chat/completions',
      session,
      sessionFrom: identified.created ? identified.session.from : session.from,
      notes: [],
      findings: [...identified.findings],
    };
    const { config, profile } = this;
    const turn = session.turns;
    const asked = clientAsked(body);
    const images = await conversationImages(
      body.messages,
      profile,
      processorSettingsOf(body.mm_processor_kwargs),
      session.images,
      {
        roots: config.imageRoots.length > 0 ? config.imageRoots : [process.cwd()],
        baseDir: process.cwd(),
        allowRemote: config.allowRemoteImages,
      },
    );
    images.forEach((img, i) => {
      if (img.problem && i >= session.images.length)
        ctx.notes.push(`image ${i}: ${img.problem}; its pad run is not checked`);
    });
    const padCounts = images.map((i) => i.padCount);
    const last = session.last;
    // Continuity compares the messages with the previous call's; the other modes need no keys.
    const keys = config.mode === 'continuity' ? conversationKeys(body.messages) : [];
    const n = last?.messageKeys?.length ?? 0;
    const extendsLast =
      !!last?.messageKeys &&
      keys.length > n + 1 &&
      last.messageKeys.every((k, i) => k === keys[i]) &&
      keys[n] === answerKey(last.answer);
    if ((body.n ?? 1) > 1) ctx.notes.push(`n=${body.n}: the session continues with choice 0`);

    // Continuity: the canonical next prompt, where it can be built and sent.
    let tokenIn: TokenInRequest | undefined;
    if (config.mode === 'continuity') {
      const fallback = (why: string) => {
        ctx.prompt = `rendered by the engine: ${why}`;
      };
      if (!last) fallback('the first call of the session');
      else if (!extendsLast)
        fallback(
          last.messageKeys && keys.slice(0, n).every((k, i) => k === last.messageKeys![i])
            ? "the assistant message is not the gateway's answer (edited or re-serialized)"
            : 'the messages do not extend the previous call (history edited or compressed)',
        );
      else if ((body.n ?? 1) > 1) fallback('n > 1 is not sent as ids');
      else if (last.generatedIds.length === 0) fallback('the previous answer has no generated ids');
      else {
        const cont = await continuationIds(
          profile,
          last,
          last.messages ?? [],
          body.messages.slice(n + 1) as Message[],
          body.tools ?? undefined,
          this.closeIds,
          padCounts,
          imagesInMessages(body.messages.slice(0, n + 1)).length,
          config.engine,
        );
        if ('unknown' in cont) fallback(cont.unknown);
        else {
          const sampling: Record<string, unknown> = {};
          for (const k of CARRIED_SAMPLING) if (body[k] !== undefined && body[k] !== null) sampling[k] = body[k];
          const maxTokens =
            body.max_completion_tokens ??
            body.max_tokens ??
            (this.maxModelLen ? this.engine.room(this.maxModelLen, cont.ids.length) : undefined);
          tokenIn = {
            model: body.model,
            promptIds: cont.ids,
            collapsedIds: collapseRuns(cont.ids, padIdsOf(profile.ids)),
            imageUrls: imagesInMessages(body.messages).flatMap((r) => (r.url ? [r.url] : [])),
            sampling,
            ...(maxTokens !== undefined ? { maxTokens } : {}),
            sessionId: session.id,
            imagesKeepIds: config.sglangKeepsImageIds,
          };
          const plan = this.engine.tokenIn(tokenIn);
          if ('unsupported' in plan) {
            fallback(plan.unsupported);
            tokenIn = undefined;
          } else {
            this.metrics.tokenizedChars.inc(cont.suffixChars);
            ctx.prompt = `ids: previous prompt (${last.promptIds.length}) ⧺ generated (${last.generatedIds.length}) ⧺ canonical suffix (${cont.suffixIds.length})`;
            if (images.length > 0)
              ctx.notes.push(
                'sent as ids with images: the engine is trusted to keep them (--sglang-keeps-image-ids); usage.prompt_tokens is compared',
              );
          }
        }
      }
    }

    // The prompt the engine will render, predicted where a check must come before the answer.
    let textState: TextTokens | undefined;
    let predicted: number[] | undefined;
    const checks = config.mode !== 'record';
    if (checks && !tokenIn && (config.onBreak === 'refuse' || body.stream)) {
      const rendered = renderChatPrompt(profile, body, config.engine);
      if ('text' in rendered) {
        textState = await this.tokenizeCounted(
          profile,
          last?.text !== undefined && last.textIds ? { text: last.text, ids: last.textIds } : undefined,
          rendered.text,
        );
        predicted = await expandPads(profile, textState, padCounts);
      } else ctx.notes.push(`the prompt was not predicted: ${rendered.unknown}`);
    }
    const early = predicted
      ? checkCall(profile, this.closeIds, { turn, promptIds: predicted, previous: last, images })
      : [];
    const refused = this.refuseOnBreak(ctx, body, early);
    if (refused) return refused;

    let answer: EngineAnswer;
    let client: Record<string, unknown> | undefined;
    const upstream = this.upstreamOptions(headers, signal, session.id);
    const asks = Date.now();
    try {
      if (tokenIn) {
        const plan = this.engine.tokenIn(tokenIn) as { path: string; body: Record<string, unknown> };
        ctx.upstreamPath = plan.path;
        const raw = await postJson(upstream, plan.path, plan.body);
        answer = this.engine.readTokenIn(raw, tokenIn);
        const outcome = chatOutcome(body, answer, profile.modelFamily.toolCalls);
        client = chatFromTokenIn(answer, outcome, asked, body.model ?? this.servedModel ?? profile.name);
        answer.toolCalls = outcome.toolCalls;
        answer.text = outcome.content;
      } else if (body.stream && this.engine.streamsChatIds) {
        const fold = new StreamFold('chat', asked);
        const out = sink();
        answer = await relayStream(
          fold,
          postSse(upstream, '/v1/chat/completions', this.engine.chatBody(streamed(body))),
          out,
          ctx.findings.length + early.length,
        );
        ctx.upstreamMs = Date.now() - asks;
        const findings = this.afterAnswer(ctx, turn, answer, undefined, predicted, images, last);
        this.finish(ctx, 'ok', body, answer.capture, findings);
        this.remember(session, ctx, turn, answer, body, keys, images, textState);
        out.end(findings.length);
        return undefined;
      } else {
        const raw = (await postJson(upstream, '/v1/chat/completions', this.engine.chatBody(whole(body)))) as Record<
          string,
          unknown
        >;
        answer = this.engine.readChat(raw);
        client = stripAnswer(raw, asked, this.engine.unasked);
      }
    } catch (e) {
      ctx.upstreamMs = Date.now() - asks;
      return this.failed(ctx, body, e);
    }
    ctx.upstreamMs = Date.now() - asks;
    const findings = this.afterAnswer(ctx, turn, answer, tokenIn, predicted, images, last);
    this.finish(ctx, 'ok', tokenIn ? { ...body, prompt: tokenIn.promptIds } : body, answer.capture, findings);
    this.remember(session, ctx, turn, answer, body, keys, images, textState);
    if (body.stream) return { kind: 'sse', events: chatChunks(client, asked), findings: findings.length };
    return { kind: 'json', status: 200, body: client, findings: findings.length };
  }

  // --- completions ---------------------------------------------------------------------------------

  async completion(
    headers: http.IncomingHttpHeaders,
    body: CompletionRequest,
    signal: AbortSignal,
    sink: () => StreamSink,
    started = performance.now(),
  ): Promise<ClientReply | undefined> {
    const promptText = typeof body.prompt === 'string' ? body.prompt : undefined;
    const identified = this.sessions.identify(this.explicitSession(headers, body), undefined, promptText);
    const session = identified.session;
    session.calls++;
    const ctx: CallContext = {
      id: randomUUID(),
      started,
      upstreamMs: 0,
      endpoint: '/v1/completions',
      upstreamPath: '/v1/completions',
      session,
      sessionFrom: session.from,
      notes: [],
      findings: [...identified.findings],
    };
    const turn = session.turns;
    const last = session.last;
    const asked = clientAsked(body);
    const checks = this.config.mode !== 'record';
    let textState: TextTokens | undefined;
    let predicted: number[] | undefined;
    if (checks && (this.config.onBreak === 'refuse' || body.stream)) {
      if (promptText !== undefined) {
        textState = await this.tokenizeCounted(
          this.profile,
          last?.text !== undefined && last.textIds ? { text: last.text, ids: last.textIds } : undefined,
          promptText,
        );
        predicted = textState.ids;
      } else predicted = body.prompt as number[];
    }
    const early = predicted
      ? checkCall(this.profile, this.closeIds, { turn, promptIds: predicted, previous: last, images: [] })
      : [];
    const refused = this.refuseOnBreak(ctx, body, early);
    if (refused) return refused;
    const upstream = this.upstreamOptions(headers, signal, session.id);
    const asks = Date.now();
    let answer: EngineAnswer;
    let client: Record<string, unknown>;
    try {
      if (body.stream && this.engine.streamsChatIds) {
        const fold = new StreamFold('completion', asked);
        const out = sink();
        answer = await relayStream(
          fold,
          postSse(upstream, '/v1/completions', this.engine.completionBody(streamed(body))),
          out,
          ctx.findings.length + early.length,
        );
        ctx.upstreamMs = Date.now() - asks;
        const findings = this.afterAnswer(ctx, turn, answer, undefined, predicted, [], last);
        this.finish(ctx, 'ok', body, answer.capture, findings);
        this.remember(session, ctx, turn, answer, undefined, undefined, [], textState, promptText);
        out.end(findings.length);
        return undefined;
      }
      const raw = (await postJson(upstream, '/v1/completions', this.engine.completionBody(whole(body)))) as Record<
        string,
        unknown
      >;
      answer = this.engine.readCompletion(raw);
      client = stripAnswer(raw, asked, this.engine.unasked);
    } catch (e) {
      ctx.upstreamMs = Date.now() - asks;
      return this.failed(ctx, body, e);
    }
    ctx.upstreamMs = Date.now() - asks;
    const findings = this.afterAnswer(ctx, turn, answer, undefined, predicted, [], last);
    this.finish(ctx, 'ok', body, answer.capture, findings);
    this.remember(session, ctx, turn, answer, undefined, undefined, [], textState, promptText);
    if (body.stream) return { kind: 'sse', events: completionChunks(client, asked), findings: findings.length };
    return { kind: 'json', status: 200, body: client, findings: findings.length };
  }

  // --- shared ------------------------------------------------------------------------------------

  private async tokenizeCounted(...args: Parameters<typeof tokenizeExtending>): Promise<TextTokens> {
    const got = await tokenizeExtending(...args);
    this.metrics.tokenizedChars.inc(got.tokenizedChars);
    return got;
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
    keys: string[] | undefined,
    images: Session['images'],
    textState: TextTokens | undefined,
    promptText?: string,
  ): void {
    const toolCalls: AnsweredToolCall[] = answer.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }));
    this.sessions.recordTurn(session, {
      promptIds: answer.promptIds ?? [],
      generatedIds: answer.generatedIds ?? [],
      ...(answer.finishReason ? { finishReason: answer.finishReason } : {}),
      ...(chat
        ? {
            messages: chat.messages as Message[],
            ...(keys && keys.length > 0 ? { messageKeys: keys } : {}),
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

/**
 * Relay an engine's stream to the client event by event while folding it into the whole answer;
 * the client's stream starts (with the findings known so far) at the first event, or at the end.
 */
async function relayStream(
  fold: StreamFold,
  events: AsyncGenerator<string>,
  out: StreamSink,
  findingsSoFar: number,
): Promise<EngineAnswer> {
  let begun = false;
  for await (const data of events) {
    if (!begun) {
      out.start(findingsSoFar);
      begun = true;
    }
    const forward = fold.take(data);
    if (forward !== undefined) out.event(forward);
  }
  if (!begun) out.start(findingsSoFar);
  return fold.answer();
}
