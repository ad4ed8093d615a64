// Logged calls grouped into trajectories: by the ids the lines state (a session id, a rollout id),
// else by prefix chaining (chain.ts), a request with several choices (`n > 1`) forking its
// conversation into samples of one group. Shared by the call logs of every engine (vLLM, SGLang's
// OpenAI and native logs) and the gateway's capture.
import type { TrajectoryInput, FormatName } from '../../model/trajectory.ts';
import type { Finding } from '../../model/finding.ts';
import type { FileContext } from '../importer.ts';
import { chainCalls, padIdsOf, uniqueIds } from '../chain.ts';
import { imagesOfTurns, type LoggedCall, videosOfTurns } from './read.ts';

interface Group {
  calls: number[];
  /** Turn indices attached to a prefix chain although their prompt breaks it. */
  breaks: number[];
  /** Prefix chaining could not tell which conversation a call continued: the turn, the call, the other candidates. */
  ambiguous?: { turn: number; call: number; others: number[] }[];
}

/** The calls of `group` that are one choice of a request with several (`n > 1`), in turn order. */
function forksOf(group: Group, calls: readonly LoggedCall[]): { turn: number; call: LoggedCall }[] {
  return group.calls.flatMap((i, turn) => (calls[i]!.request !== undefined ? [{ turn, call: calls[i]! }] : []));
}

/** Lines of other conversations an ambiguity names (the trajectory's grouping depends on them). */
function relatedLines(group: Group, calls: readonly LoggedCall[], own: readonly number[]): number[] {
  const lines = (group.ambiguous ?? []).flatMap((a) => [calls[a.call]!.line, ...a.others.map((i) => calls[i]!.line)]);
  return [...new Set(lines)].filter((l) => !own.includes(l)).sort((a, b) => a - b);
}

/** `grouping_ambiguous` findings: the grouping of these turns is a guess the ids could have settled. */
export function ambiguityFindings(
  ambiguous: readonly {
    turn: number;
    line: number;
    otherLines: number[];
    /** The samples (choices of one request, n > 1) the other candidates are, when they are. */
    otherSamples?: number[];
  }[],
  turnCount: number,
): Finding[] {
  return ambiguous.map((a) => {
    const others = a.otherLines.map((l) => `line ${l}`).join(', ');
    const samples = a.otherSamples && `sample${a.otherSamples.length > 1 ? 's' : ''} ${a.otherSamples.join(', ')}`;
    const requestLines = [...new Set(a.otherLines)].map((l) => `line ${l}`).join(', ');
    return {
      kind: 'grouping_ambiguous',
      severity: 'error',
      turn: Math.min(a.turn, turnCount - 1),
      index: -1,
      actual: { line: a.line, alsoContinues: a.otherLines },
      message: samples
        ? `the call on line ${a.line} continues this sample and ${samples} of the request on ${requestLines} equally (identical answers so far): which sample's conversation it belongs to is a guess, so the turns from here on may belong to another sample; log each sample's calls with a session_id of its own`
        : `the call on line ${a.line} extends this conversation and the one${a.otherLines.length > 1 ? 's' : ''} starting on ${others} equally (identical prompts and answers so far): prefix chaining cannot tell which it continues, so the turns from here on may belong to the other conversation; log a session_id (or trajectory_id) with each call`,
    };
  });
}

/** What a call log of one engine says when ids are missing (the fields that engine would have written). */
export interface CallLogFormat {
  format: FormatName;
  noPromptIds: string;
  noGeneratedIds: string;
}

function assemble(file: string, calls: readonly LoggedCall[], group: Group, log: CallLogFormat): TrajectoryInput {
  const members = group.calls.map((i) => calls[i]!);
  const first = members[0]!;
  // Tools ride on each turn: the chat template renders them into the system turn.
  const turns = members.map((c) => (c.tools && c.tools.length > 0 ? { ...c.turn, tools: c.tools } : c.turn));
  const videos = videosOfTurns(turns);
  const lines = [...new Set(members.map((c) => c.line))];
  const limitations: string[] = [];
  if (turns.some((t) => !t.promptIds)) limitations.push(log.noPromptIds);
  if (turns.some((t) => !t.generatedIds)) limitations.push(log.noGeneratedIds);
  const model = members.find((c) => c.model)?.model;
  const reward = [...members].reverse().find((c) => c.reward !== undefined)?.reward;
  // A request with several choices forks the conversation: each choice is a trajectory of its own
  // (`#<choice>`, `#<choice>.<choice>` after a second fork), a sample of the group of the request it
  // was last forked at: `<session> call <turn>` where the calls name their session, else the request.
  const forks = forksOf(group, calls);
  // A choice of a batch (several prompts in one request) keeps its index too.
  const choices = forks.length > 0 ? forks.map((f) => f.call.choice).join('.') : first.choice;
  const id = `${first.key ? first.key.value : `line ${first.line}`}${choices !== undefined ? `#${choices}` : ''}`;
  const fork = forks[forks.length - 1];
  const groupId = fork && (first.key ? `${first.key.value} call ${fork.turn}` : fork.call.request);
  return {
    id,
    source: { file, line: first.line, format: log.format, ...(lines.length > 1 ? { lines } : {}) },
    ...(model ? { model } : {}),
    ...(groupId !== undefined ? { group: groupId } : {}),
    turns,
    images: [...members].reverse().find((c) => c.images)?.images ?? imagesOfTurns(turns),
    ...(videos.length > 0 ? { videos } : {}),
    ...(reward !== undefined ? { reward } : {}),
    limitations,
    meta: {
      groupedBy: first.key ? first.key.field : members.length > 1 ? 'prefix chain' : 'single call',
      ...(group.breaks.length > 0 ? { attachedAfterBreak: group.breaks } : {}),
      ...(group.ambiguous?.length ? { relatedLines: relatedLines(group, calls, lines) } : {}),
    },
    ...(group.ambiguous?.length
      ? {
          sourceFindings: ambiguityFindings(
            group.ambiguous.map((a) => {
              const others = a.others.map((i) => calls[i]!);
              return {
                turn: a.turn,
                line: calls[a.call]!.line,
                otherLines: others.map((c) => c.line),
                ...(others.every((c) => c.request !== undefined && c.choice !== undefined)
                  ? { otherSamples: others.map((c) => c.choice!) }
                  : {}),
              };
            }),
            turns.length,
          ),
        }
      : {}),
  };
}

/**
 * Group calls: explicit ids first, prefix chaining for the rest; trajectories in order of their
 * first call. A request with several choices (`n > 1`) forks its conversation: every choice starts
 * a trajectory of its own that holds the calls before the fork, and each later call goes to the
 * branch it continues (`branchesOf`, `withForkHistory`).
 */
function groupCalls(calls: readonly LoggedCall[], ctx: FileContext): Group[] {
  const byKey = new Map<string, number[]>();
  const unkeyed: number[] = [];
  calls.forEach((c, i) => {
    if (!c.key) return unkeyed.push(i);
    // The prompts of a batch are conversations apart.
    const k = c.choice !== undefined && c.request === undefined ? `${c.key.value}#${c.choice}` : c.key.value;
    const list = byKey.get(k);
    if (list) list.push(i);
    else byKey.set(k, [i]);
  });
  const keyed = [...byKey.values()].flatMap((indices) => branchesOf(calls, indices));
  const chains = chainCalls(
    unkeyed.map((i) => {
      const t = calls[i]!.turn;
      return {
        promptIds: t.promptIds ?? [],
        generatedIds: t.generatedIds ?? [],
        messages: t.messages,
        answerText: t.generatedText,
      };
    }),
    {
      padIds: padIdsOf(
        ctx,
        unkeyed.map((i) => calls[i]!.model),
      ),
    },
  );
  const chained = chains.map((ch) => ({
    calls: ch.calls.map((j) => unkeyed[j]!),
    breaks: ch.breaks,
    // Other candidates are named by their first call.
    ambiguous: ch.ambiguous.map((a) => ({
      turn: a.position,
      call: unkeyed[a.call]!,
      others: a.others.map((o) => unkeyed[chains[o]!.calls[0]!]!),
    })),
  }));
  withForkHistory(calls, chained);
  return [...keyed, ...chained].sort((a, b) => a.calls[0]! - b.calls[0]!);
}

/** Whether `call` continues the conversation whose last call is `last`: by ids, else by messages. */
function continues(call: LoggedCall, last: LoggedCall): boolean {
  const prompt = call.turn.promptIds;
  const context = last.turn.promptIds;
  if (prompt && context) {
    const gen = last.turn.generatedIds ?? [];
    if (prompt.length < context.length + gen.length) return false;
    for (let i = 0; i < context.length; i++) if (!Object.is(prompt[i], context[i])) return false;
    for (let i = 0; i < gen.length; i++) if (!Object.is(prompt[context.length + i], gen[i])) return false;
    return true;
  }
  // Without ids: the conversation repeats the last call's messages, then that call's answer.
  const history = last.turn.messages;
  const messages = call.turn.messages;
  if (!history || !messages || messages.length <= history.length) return false;
  for (let i = 0; i < history.length; i++) if (JSON.stringify(messages[i]) !== JSON.stringify(history[i])) return false;
  const said = messages[history.length];
  const answer = last.turn.generatedText?.trim();
  return (
    said?.role === 'assistant' && typeof said.content === 'string' && !!answer && said.content.trim().startsWith(answer)
  );
}

/**
 * The calls of one named conversation (a session id) as trajectories. Without a request of several
 * choices it is one; a fork starts one branch per choice, each holding the calls before it, and a
 * later call goes to the branch it continues (its prompt extends the branch's last prompt ⧺
 * generation, or its messages repeat the branch's answer). A call that continues several branches
 * equally goes to the first and is reported (`grouping_ambiguous`). A call that continues none is
 * still this conversation's (the id says so): one that asks a prompt an earlier call asked is
 * another sample of that turn and starts a branch beside it, with the same history; any other goes
 * to the branch it shares the longest prefix with, so its break is checked as it would be in a
 * conversation without forks (ties: the first, reported). A call never leaves the conversation
 * it names, so a retried or resampled call cannot split the turns around it apart (and hide
 * their prefix break).
 */
function branchesOf(calls: readonly LoggedCall[], indices: readonly number[]): Group[] {
  if (!indices.some((i) => calls[i]!.request !== undefined)) return [{ calls: [...indices], breaks: [] }];
  const branches: Group[] = [];
  const candidates = (call: LoggedCall) =>
    branches.filter((b) => continues(call, calls[b.calls[b.calls.length - 1]!]!));
  /** The call of a branch that made it a sample of its request (the last fork it holds), else its last call. */
  const sampleOf = (b: Group) =>
    b.calls.findLast((j) => calls[j]!.request !== undefined) ?? b.calls[b.calls.length - 1]!;
  // Every candidate lists the guess, as prefix chaining does (chain.ts).
  const chosen = (found: readonly Group[], at: number): Group | undefined => {
    if (found.length > 1)
      for (const b of found)
        (b.ambiguous ??= []).push({
          turn: b.calls.length,
          call: at,
          others: found.filter((o) => o !== b).map(sampleOf),
        });
    return found[0];
  };
  /** Where a call goes: the branch it continues or shares the most with, or beside the turn it asks again. */
  const placeOf = (call: LoggedCall, at: number): { parent?: Group; history?: Group } => {
    const found = candidates(call);
    if (found.length > 0) return { parent: chosen(found, at) };
    const asked = branches.find((b) => b.calls.some((j) => samePrompt(calls[j]!, call)));
    if (asked) {
      const k = asked.calls.findIndex((j) => samePrompt(calls[j]!, call));
      return { history: { calls: asked.calls.slice(0, k), breaks: asked.breaks.filter((x) => x < k) } };
    }
    let best: Group[] = [];
    let bestShared = -1;
    for (const b of branches) {
      const shared = sharedPrefix(call, calls[b.calls[b.calls.length - 1]!]!);
      if (shared > bestShared) [best, bestShared] = [[b], shared];
      else if (shared === bestShared) best.push(b);
    }
    return { parent: chosen(best, at) };
  };
  for (let n = 0; n < indices.length; ) {
    const i = indices[n]!;
    const call = calls[i]!;
    if (call.request === undefined) {
      const { parent, history } = placeOf(call, i);
      if (parent) parent.calls.push(i);
      else branches.push({ calls: [...(history?.calls ?? []), i], breaks: [...(history?.breaks ?? [])] });
      n++;
      continue;
    }
    // The choices of one request answer one prompt: they continue the same branch.
    const fork: number[] = [];
    while (n < indices.length && calls[indices[n]!]!.line === call.line && calls[indices[n]!]!.request === call.request)
      fork.push(indices[n++]!);
    const { parent, history } = placeOf(call, i);
    if (parent) branches.splice(branches.indexOf(parent), 1);
    const before = parent ?? history;
    for (const choice of fork)
      branches.push({
        calls: [...(before?.calls ?? []), choice],
        breaks: [...(before?.breaks ?? [])],
        ...(parent?.ambiguous ? { ambiguous: [...parent.ambiguous] } : {}),
      });
  }
  return branches;
}

/** Whether two calls asked the same prompt (by ids, else by messages): samples of one turn. */
function samePrompt(a: LoggedCall, b: LoggedCall): boolean {
  const [x, y] = [a.turn.promptIds, b.turn.promptIds];
  if (x && y) return x.length === y.length && x.every((v, k) => Object.is(v, y[k]));
  return !!a.turn.messages && !!b.turn.messages && JSON.stringify(a.turn.messages) === JSON.stringify(b.turn.messages);
}

/** How far `call`'s prompt follows the conversation that ends with `last` (ids, else whole messages). */
function sharedPrefix(call: LoggedCall, last: LoggedCall): number {
  const prompt = call.turn.promptIds;
  if (prompt && last.turn.promptIds) {
    const context = [...last.turn.promptIds, ...(last.turn.generatedIds ?? [])];
    let k = 0;
    while (k < prompt.length && k < context.length && Object.is(prompt[k], context[k])) k++;
    return k;
  }
  const [mine, theirs] = [call.turn.messages ?? [], last.turn.messages ?? []];
  let k = 0;
  while (k < mine.length && k < theirs.length && JSON.stringify(mine[k]) === JSON.stringify(theirs[k])) k++;
  return k;
}

/**
 * Prefix chaining puts the first choice of a request made after the conversation began into the
 * conversation's chain, and starts a chain at each other choice (their common prompt is no longer
 * than the chain's last one): those get the calls before the fork too, so every sample of the
 * request holds the same history.
 */
function withForkHistory(calls: readonly LoggedCall[], chains: Group[]): void {
  const chainOf = new Map<number, Group>();
  for (const g of chains) for (const i of g.calls) if (calls[i]!.request !== undefined) chainOf.set(i, g);
  const byRequest = new Map<string, number[]>();
  for (const i of chainOf.keys()) {
    const key = `${calls[i]!.line}\u0000${calls[i]!.request}`;
    const list = byRequest.get(key);
    if (list) list.push(i);
    else byRequest.set(key, [i]);
  }
  for (const choices of byRequest.values()) {
    const withHistory = choices.map((i) => chainOf.get(i)!).find((g, k) => g.calls.indexOf(choices[k]!) > 0);
    if (!withHistory) continue;
    const at = withHistory.calls.findIndex((i) => choices.includes(i));
    const history = withHistory.calls.slice(0, at);
    for (const i of choices) {
      const g = chainOf.get(i)!;
      if (g.calls[0] !== i) continue;
      g.calls = [...history, ...g.calls];
      g.breaks = [...withHistory.breaks.filter((b) => b < at), ...g.breaks.map((b) => b + at)];
      g.ambiguous = g.ambiguous?.map((a) => ({ ...a, turn: a.turn + at }));
    }
  }
}

/**
 * Calls of one request/response log as trajectories: grouped by the ids the lines state, else by
 * prefix chaining (ambiguities reported), ids unique within the file. Shared by the engines whose
 * logs have this shape (vLLM, SGLang).
 */
export function trajectoriesFromCalls(
  ctx: FileContext,
  calls: readonly LoggedCall[],
  log: CallLogFormat,
): TrajectoryInput[] {
  const unique = uniqueIds();
  return groupCalls(calls, ctx).map((g) => {
    const t = assemble(ctx.file, calls, g, log);
    return { ...t, id: unique(t.id) };
  });
}
