// `rollscope gateway`: an OpenAI-compatible server between an agent and vLLM/SGLang that captures
// every call token-exact, checks each against its session's previous turn, or builds the prompt
// ids itself (server/gateway/, docs/gateway.md).
import { parse, positiveInt, UsageError, type Command } from '../command.ts';
import { DEFAULT_SESSION_HEADER, ENGINE_KINDS, GATEWAY_MODES, GatewayConfig, ON_BREAK } from '../../gateway/config.ts';
import { startGateway } from '../../gateway/server.ts';

/** `HOST:PORT`, `[v6]:PORT` or `PORT`. */
function listenAddress(v: string | undefined): { host?: string; port?: number } {
  if (v === undefined) return {};
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(v) ?? /^()()(\d+)$/.exec(v);
  if (!m) throw new UsageError(`--listen takes HOST:PORT (127.0.0.1:8765), got "${v}"`);
  const port = Number(m[3]);
  if (port > 65535) throw new UsageError(`--listen: port must be at most 65535, got ${port}`);
  const host = m[1] ?? m[2];
  return { ...(host ? { host } : {}), port };
}

function seconds(name: string, v: string | undefined): number | undefined {
  const n = positiveInt(name, v);
  return n === undefined ? undefined : n * 1000;
}

export const command: Command = {
  name: 'gateway',
  summary: 'an OpenAI-compatible gateway to vLLM/SGLang: token-exact capture, a live prefix guard, or token continuity',
  usage: `rollscope gateway --upstream URL --out DIR [--engine vllm|sglang] [--listen HOST:PORT]
                  [--mode record|guard|continuity] [--on-break pass|refuse] [--model M] [options]

Agents point their OpenAI client at the gateway (base_url http://HOST:PORT/v1) and it forwards to
the engine at URL. Every call is written to DIR as one line of a vLLM call log, grouped by session:
\`rollscope serve DIR\` shows the run live, \`check\` and \`export\` read it like any run.
Prints "listening on http://HOST:PORT" once ready. SIGTERM or SIGINT stops it like a server: new
requests get 503 (Connection: close), the calls already accepted finish (within --grace), the
capture is flushed and closed last, and it exits 0 (at once when idle). GET /health answers 200
while the gateway and its engine are ready (docs/gateway.md for Kubernetes probes).

Modes (docs/gateway.md):
  record       ask the engine for its exact ids (vLLM return_token_ids, SGLang prompt ids and meta
               info) without changing what the client sees
  guard        record, and check every call against its session's previous one at once: the prompt
               against previous prompt + generated ids (prefix_break with its cause and token), pad
               runs against the images, usage.prompt_tokens; findings go to the capture, the
               x-rollscope-findings header, GET /rollscope/sessions/ID and /metrics (default)
  continuity   the gateway builds the next prompt itself (previous prompt ids + generated ids + the
               canonical, EOS-aware suffix of the new messages) and sends ids to the engine's
               token-in endpoint; a call whose messages do not extend the session falls back to
               the engine's rendering, checked, and the capture says why

Options:
  --upstream URL        the engine (http://127.0.0.1:8000)
  --engine E            vllm (default) or sglang
  --listen HOST:PORT    where to listen (default 127.0.0.1:8765; port 0 = any free port). Beyond
                        loopback --token is required
  --out DIR             capture folder (created); files gateway-REPLICA-PID-START-N.jsonl
  --mode M              record, guard (default) or continuity
  --on-break B          pass (default) or refuse: answer 409 with the finding instead of forwarding
  --model M             profile: qwen2-vl, qwen2.5-vl, qwen3-vl, a model name, or a local model folder
                        (default: inferred from the engine's served model)
  --session-header H    header naming the session (default ${DEFAULT_SESSION_HEADER}); else the body's
                        session_id or user; else the message prefix
  --session-ttl S       forget a session idle this many seconds (default 1800)
  --max-sessions N      hold at most N sessions, forgetting the longest idle (default 10000)
  --rotate-bytes N      a capture file takes no new session past N bytes (default 268435456)
  --max-body-bytes N    largest request body (default 33554432: 32 MiB)
  --max-prompt-tokens N never tokenize a prompt past N tokens (default: the engine's max_model_len;
                        such a prompt goes to the engine, which refuses it)
  --grace S             on SIGTERM, seconds the calls in flight may take to finish (default 30)
  --upstream-timeout S  seconds to wait for the engine (default 600); then 504
  --token T             bearer token every client must send (Authorization: Bearer T)
  --forward-auth        pass the client's Authorization header to the engine
  --upstream-key-env V  send the API key in environment variable V to the engine
  --image-root DIR      folder local image files may be read from to size them (repeatable;
                        default: the working directory)
  --allow-remote-images read http(s) images to size them (the engine fetches them either way)
  --sglang-keeps-image-ids
                        the SGLang engine runs with SGLANG_MM_AVOID_RETOKENIZE=1, so continuity sends
                        ids with images too (else such calls are rendered by the engine and checked)
  --replica NAME        this process's name in file names and /metrics (default: the host name)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      upstream: { type: 'string' },
      engine: { type: 'string' },
      listen: { type: 'string' },
      out: { type: 'string' },
      mode: { type: 'string' },
      'on-break': { type: 'string' },
      model: { type: 'string' },
      'session-header': { type: 'string' },
      'session-ttl': { type: 'string' },
      'max-sessions': { type: 'string' },
      'rotate-bytes': { type: 'string' },
      'max-body-bytes': { type: 'string' },
      'max-prompt-tokens': { type: 'string' },
      grace: { type: 'string' },
      'upstream-timeout': { type: 'string' },
      token: { type: 'string' },
      'forward-auth': { type: 'boolean', default: false },
      'upstream-key-env': { type: 'string' },
      'image-root': { type: 'string', multiple: true },
      'allow-remote-images': { type: 'boolean', default: false },
      'sglang-keeps-image-ids': { type: 'boolean', default: false },
      replica: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    if (!values.upstream) throw new UsageError('--upstream URL is required (the vLLM or SGLang server)');
    if (!values.out) throw new UsageError('--out DIR is required (the capture folder)');
    const oneOf = (name: string, v: string | undefined, allowed: readonly string[]) => {
      if (v !== undefined && !allowed.includes(v))
        throw new UsageError(`--${name} takes ${allowed.join(', ')}, got "${v}"`);
      return v;
    };
    const parsed = GatewayConfig.safeParse({
      upstream: values.upstream,
      engine: oneOf('engine', values.engine, ENGINE_KINDS),
      ...listenAddress(values.listen),
      out: values.out,
      model: values.model,
      mode: oneOf('mode', values.mode, GATEWAY_MODES),
      onBreak: oneOf('on-break', values['on-break'], ON_BREAK),
      sessionHeader: values['session-header'],
      sessionTtlMs: seconds('session-ttl', values['session-ttl']),
      maxSessions: positiveInt('max-sessions', values['max-sessions']),
      rotateBytes: positiveInt('rotate-bytes', values['rotate-bytes']),
      maxBodyBytes: positiveInt('max-body-bytes', values['max-body-bytes']),
      maxPromptTokens: positiveInt('max-prompt-tokens', values['max-prompt-tokens']),
      graceMs: seconds('grace', values.grace),
      upstreamTimeoutMs: seconds('upstream-timeout', values['upstream-timeout']),
      token: values.token,
      forwardAuth: values['forward-auth'],
      upstreamKeyEnv: values['upstream-key-env'],
      allowRemoteImages: values['allow-remote-images'],
      imageRoots: values['image-root'] ?? [],
      sglangKeepsImageIds: values['sglang-keeps-image-ids'],
      replica: values.replica,
    });
    if (!parsed.success) {
      const flag = (p: PropertyKey[]) =>
        `--${String(p[0] ?? 'option').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
      throw new UsageError(parsed.error.issues.map((i) => `${flag(i.path)}: ${i.message}`).join('; '));
    }
    const config = parsed.data;
    const log = (line: string) => process.stderr.write(`rollscope gateway: ${line}\n`);
    let running: Awaited<ReturnType<typeof startGateway>>;
    try {
      running = await startGateway(config, log);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL')
        throw new UsageError(`cannot listen on ${config.host}:${config.port} (${code})`);
      throw e;
    }
    log(
      `${config.mode} mode, ${config.engine} at ${config.upstream}, profile ${running.gateway.profileName}, capture in ${config.out} (replica ${running.gateway.replica})`,
    );
    process.stdout.write(`listening on ${running.url}\n`);
    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        log(
          `${signal}: stopping (new requests get 503; calls in flight finish within ${config.graceMs / 1000} s, then the capture is closed)`,
        );
        void running.close().then(resolve);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    log('stopped: the capture is flushed and closed');
    return 0;
  },
};
