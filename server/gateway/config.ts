// What a gateway runs with (`rollscope gateway`, docs/gateway.md): validated once, at start-up,
// so a bad combination is a usage error before anything listens.
import { z } from 'zod';
import { needsToken } from '../http/gate.ts';

export const GATEWAY_MODES = ['record', 'guard', 'continuity'] as const;
export type GatewayMode = (typeof GATEWAY_MODES)[number];

export const ENGINE_KINDS = ['vllm', 'sglang'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export const ON_BREAK = ['pass', 'refuse'] as const;
export type OnBreak = (typeof ON_BREAK)[number];

export const DEFAULT_SESSION_HEADER = 'x-session-id';

export const GatewayConfig = z
  .object({
    upstream: z
      .string()
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL')
      .transform((u) => u.replace(/\/+$/, '')),
    engine: z.enum(ENGINE_KINDS).default('vllm'),
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(8765),
    out: z.string().min(1),
    /** A profile spec (`qwen2.5-vl`, a model name, a local model folder); default: inferred from the served model. */
    model: z.string().min(1).optional(),
    mode: z.enum(GATEWAY_MODES).default('guard'),
    onBreak: z.enum(ON_BREAK).default('pass'),
    sessionHeader: z
      .string()
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be an HTTP header name')
      .transform((h) => h.toLowerCase())
      .default(DEFAULT_SESSION_HEADER),
    /** Idle sessions are forgotten after this long. */
    sessionTtlMs: z
      .number()
      .int()
      .positive()
      .default(30 * 60 * 1000),
    /** At most this many sessions are held; the longest idle goes first. */
    maxSessions: z.number().int().positive().default(10_000),
    /** A capture file takes no new session past this size (the sessions already in it finish there). */
    rotateBytes: z
      .number()
      .int()
      .positive()
      .default(256 * 1024 * 1024),
    /**
     * Largest request body. A conversation is at most its context of text (a few MB at 128k tokens)
     * plus its images as data URLs; the gateway holds a body, its parse and the session's copy at
     * once, so the cap bounds its memory per call (docs/gateway.md "Bounded work").
     */
    maxBodyBytes: z
      .number()
      .int()
      .positive()
      .default(32 * 1024 * 1024),
    /** Prompts past this many tokens are never tokenized by the gateway (default: the engine's max_model_len). */
    maxPromptTokens: z.number().int().positive().optional(),
    /** On SIGTERM, how long calls in flight may take to finish before they are cut. */
    graceMs: z.number().int().positive().default(30_000),
    upstreamTimeoutMs: z.number().int().positive().default(600_000),
    /** Bearer token every client request must carry (required off loopback). */
    token: z.string().min(16, 'must be at least 16 characters').optional(),
    /** Pass the client's Authorization header on to the engine. */
    forwardAuth: z.boolean().default(false),
    /** Name of an environment variable holding the engine's API key (sent as a bearer token). */
    upstreamKeyEnv: z.string().min(1).optional(),
    /** Read http(s) images to size them (the engine fetches them itself either way). */
    allowRemoteImages: z.boolean().default(false),
    /** Folders local image files may be read from (to size them); default: the working directory. */
    imageRoots: z.array(z.string().min(1)).default([]),
    /** The SGLang engine runs with SGLANG_MM_AVOID_RETOKENIZE=1: token ids sent with images are kept. */
    sglangKeepsImageIds: z.boolean().default(false),
    /** Names this process in capture file names and `/metrics` (default: host name and pid). */
    replica: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" and "-" only')
      .optional(),
  })
  .superRefine((c, ctx) => {
    if (needsToken(c.host) && !c.token)
      ctx.addIssue({
        code: 'custom',
        path: ['token'],
        message: `listening on ${c.host} (beyond loopback) needs --token: anyone who can reach the port could use the engine and read the capture`,
      });
    if (c.forwardAuth && c.token)
      ctx.addIssue({
        code: 'custom',
        path: ['forwardAuth'],
        message: "--forward-auth with --token: the client's Authorization header carries the gateway's token",
      });
    if (c.forwardAuth && c.upstreamKeyEnv)
      ctx.addIssue({
        code: 'custom',
        path: ['upstreamKeyEnv'],
        message: '--forward-auth and --upstream-key-env both set the engine credential: give one',
      });
    if (c.upstreamKeyEnv && !process.env[c.upstreamKeyEnv])
      ctx.addIssue({
        code: 'custom',
        path: ['upstreamKeyEnv'],
        message: `environment variable ${c.upstreamKeyEnv} is not set`,
      });
  });
export type GatewayConfig = z.output<typeof GatewayConfig>;
export type GatewayConfigInput = z.input<typeof GatewayConfig>;
