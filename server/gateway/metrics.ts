// `GET /metrics`: Prometheus text exposition from prom-client, one registry per gateway (so two
// gateways in one process, as in the tests, never share counters).
import client from 'prom-client';
import { FINDING_KINDS, type FindingKind } from '../model/finding.ts';

// Own time is milliseconds of work per call; the engine's is seconds to minutes.
const OWN_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1];
const UPSTREAM_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export class GatewayMetrics {
  readonly registry = new client.Registry();
  readonly calls: client.Counter<'endpoint' | 'outcome' | 'mode'>;
  readonly findings: client.Counter<'kind'>;
  readonly own: client.Histogram<'endpoint'>;
  readonly upstream: client.Histogram<'endpoint'>;
  readonly tokenizedChars: client.Counter;
  readonly fallbacks: client.Counter<'reason'>;
  readonly retries: client.Counter;
  readonly sessions: client.Gauge;
  readonly evicted: client.Gauge;

  constructor(labels: { replica: string; engine: string }, sessions: () => { open: number; evicted: number }) {
    this.registry.setDefaultLabels(labels);
    const registers = [this.registry];
    this.calls = new client.Counter({
      name: 'rollscope_gateway_calls_total',
      help: 'Calls answered, by client endpoint, outcome (ok, failed, cancelled, refused) and mode',
      labelNames: ['endpoint', 'outcome', 'mode'],
      registers,
    });
    this.findings = new client.Counter({
      name: 'rollscope_gateway_findings_total',
      help: 'Findings of the per-call checks, by kind',
      labelNames: ['kind'],
      registers,
    });
    // Every kind present from the start, so a rate() query has a series before the first finding.
    for (const kind of FINDING_KINDS) this.findings.inc({ kind }, 0);
    this.own = new client.Histogram({
      name: 'rollscope_gateway_own_seconds',
      help: "The gateway's own time per call (reading, sessions, checks, rendering, writing the capture), the engine excluded",
      labelNames: ['endpoint'],
      buckets: OWN_BUCKETS,
      registers,
    });
    this.upstream = new client.Histogram({
      name: 'rollscope_gateway_upstream_seconds',
      help: "Time waiting for the engine's answer",
      labelNames: ['endpoint'],
      buckets: UPSTREAM_BUCKETS,
      registers,
    });
    this.tokenizedChars = new client.Counter({
      name: 'rollscope_gateway_tokenized_chars_total',
      help: 'Characters of prompt text the gateway tokenized itself (only what each call adds to its session)',
      registers,
    });
    this.fallbacks = new client.Counter({
      name: 'rollscope_gateway_fallbacks_total',
      help: 'Continuity calls rendered by the engine instead of sent as ids, by reason (first_call, answer_edited, history_edited, field:<name>, field:unknown, tool_choice, template, image_size, engine_images, reasoning_parser, no_generated_ids)',
      labelNames: ['reason'],
      registers,
    });
    this.retries = new client.Counter({
      name: 'rollscope_gateway_upstream_retries_total',
      help: 'Requests sent to the engine again after a kept-alive connection failed before any byte of the answer',
      registers,
    });
    this.sessions = new client.Gauge({
      name: 'rollscope_gateway_sessions',
      help: 'Sessions held in memory',
      registers,
      collect() {
        this.set(sessions().open);
      },
    });
    this.evicted = new client.Gauge({
      name: 'rollscope_gateway_sessions_evicted',
      help: 'Sessions forgotten so far (idle past the TTL, or past the session cap)',
      registers,
      collect() {
        this.set(sessions().evicted);
      },
    });
  }

  countFindings(kinds: readonly FindingKind[]): void {
    for (const kind of kinds) this.findings.inc({ kind });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
