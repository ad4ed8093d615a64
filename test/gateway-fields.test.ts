// Continuity's field table against the engines' own request models: every field of vLLM's and
// SGLang's chat request (and of the OpenAI SDK's) is classified, a carried field is one the
// token-in endpoint takes, a translated one lands where `/generate` takes it, and docs/gateway.md
// shows the table the code holds. The field lists are data extracted from the engines' files at the
// commits they name (test/fixtures/engine-protocols/fields.json): a field added upstream fails here
// until it is classified in server/gateway/fields.ts.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHAT_FIELDS, fieldFallback, TRANSLATED_IN_CODE, type FieldRule } from '../server/gateway/fields.ts';
import { ROOT } from './support/gateway-harness.ts';

interface FieldList {
  commit?: string;
  path: string;
  fields: string[];
  alsoRead?: string[];
}
const protocols = JSON.parse(
  fs.readFileSync(path.join(ROOT, 'test/fixtures/engine-protocols/fields.json'), 'utf8'),
) as {
  vllm: { ChatCompletionRequest: FieldList; CompletionRequest: FieldList };
  sglang: { ChatCompletionRequest: FieldList; GenerateReqInput: FieldList; SamplingParams: FieldList };
  'openai-node': FieldList & { version: string };
};
const vllmChat = protocols.vllm.ChatCompletionRequest.fields;
const sglangChat = [
  ...protocols.sglang.ChatCompletionRequest.fields,
  ...(protocols.sglang.ChatCompletionRequest.alsoRead ?? []),
];
const openai = protocols['openai-node'].fields;

/** The top-level fields of the installed OpenAI SDK's chat request type. */
function sdkChatFields(): string[] {
  const file = path.join(ROOT, 'node_modules/openai', protocols['openai-node'].path);
  const text = fs.readFileSync(file, 'utf8');
  const at = text.indexOf('export interface ChatCompletionCreateParamsBase');
  let depth = 0;
  let end = text.indexOf('{', at);
  const start = end;
  for (; end < text.length; end++) {
    if (text[end] === '{') depth++;
    else if (text[end] === '}' && --depth === 0) break;
  }
  return [...text.slice(start + 1, end).matchAll(/^ {4}(\w+)\??:/gm)].map((m) => m[1]!);
}

describe('the continuity field table', () => {
  it.each([
    ['vLLM ChatCompletionRequest', vllmChat],
    ['SGLang ChatCompletionRequest', sglangChat],
    ['OpenAI SDK ChatCompletionCreateParams', openai],
  ])('classifies every field of %s', (_name, fields) => {
    expect(fields.filter((f) => !(f in CHAT_FIELDS))).toEqual([]);
  });

  it('names no field that no request model has', () => {
    const known = new Set([...vllmChat, ...sglangChat, ...openai]);
    expect(Object.keys(CHAT_FIELDS).filter((f) => !known.has(f))).toEqual([]);
  });

  it('is checked against the OpenAI SDK the tests drive (its chat request fields are the list)', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules/openai/package.json'), 'utf8'));
    expect(pkg.version).toBe(protocols['openai-node'].version);
    expect(sdkChatFields()).toEqual(openai);
  });

  it('carries to vLLM only what /v1/completions takes, and a field vLLM chat ignores is never sent', () => {
    const completion = new Set(protocols.vllm.CompletionRequest.fields);
    for (const [field, rules] of Object.entries(CHAT_FIELDS)) {
      const rule = rules.vllm;
      if (rule.use === 'carried') expect(completion.has(field), field).toBe(true);
      if (!vllmChat.includes(field)) expect(['ignored', 'fallback'], field).toContain(rule.use);
    }
  });

  it('moves SGLang fields only where /generate and its sampling params take them', () => {
    const generate = new Set(protocols.sglang.GenerateReqInput.fields);
    const sampling = new Set(protocols.sglang.SamplingParams.fields);
    for (const [field, rules] of Object.entries(CHAT_FIELDS)) {
      const rule = rules.sglang;
      if (rule.use === 'carried') expect(generate.has(field), field).toBe(true);
      if (rule.to?.startsWith('sampling_params.'))
        expect(sampling.has(rule.to.slice('sampling_params.'.length)), `${field} → ${rule.to}`).toBe(true);
      else if (rule.to) expect(generate.has(rule.to), `${field} → ${rule.to}`).toBe(true);
      if (!sglangChat.includes(field)) expect(['ignored', 'fallback'], field).toContain(rule.use);
    }
  });

  it('translates in code exactly the fields it says it does', () => {
    const byCode = Object.entries(CHAT_FIELDS)
      .filter(([, r]) => Object.values(r).some((x: FieldRule) => x.use === 'translated' && !x.to))
      .map(([f]) => f)
      .sort();
    expect(byCode).toEqual([...TRANSLATED_IN_CODE].sort());
  });

  it('falls back on a field it does not know, and on a set fallback field, naming it', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'x' }] };
    expect(fieldFallback(body, 'vllm')).toBeUndefined();
    expect(
      fieldFallback({ ...body, echo: false, add_generation_prompt: true, chat_template_kwargs: {} }, 'vllm'),
    ).toBeUndefined();
    expect(fieldFallback({ ...body, echo: true }, 'vllm')).toMatchObject({ field: 'echo', known: true });
    expect(fieldFallback({ ...body, brand_new_knob: 1 }, 'vllm')).toMatchObject({
      field: 'brand_new_knob',
      known: false,
    });
    expect(fieldFallback({ ...body, chat_template_kwargs: { tools: [] } }, 'sglang')).toMatchObject({
      field: 'chat_template_kwargs',
    });
  });

  it('is the table docs/gateway.md shows', () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs/gateway.md'), 'utf8');
    const cell = (r: FieldRule) => `${r.use}: ${r.how}${r.to ? ` (\`${r.to}\`)` : ''}`.replace(/\|/g, '\\|');
    const rows = Object.entries(CHAT_FIELDS).map(([f, r]) => `| \`${f}\` | ${cell(r.vllm)} | ${cell(r.sglang)} |`);
    const table = ['| field | vLLM | SGLang |', '| --- | --- | --- |', ...rows].join('\n');
    const normalize = (t: string) =>
      t
        .split('\n')
        .filter((l) => l.startsWith('|') && !/^\|[\s-|]+\|$/.test(l))
        .map((l) =>
          l
            .split('|')
            .map((c) => c.trim())
            .join('|'),
        );
    const start = doc.indexOf('<!-- continuity-fields -->');
    const end = doc.indexOf('<!-- /continuity-fields -->');
    const shown = start >= 0 && end > start ? doc.slice(start, end) : '';
    if (JSON.stringify(normalize(shown)) !== JSON.stringify(normalize(table)))
      console.log(`docs/gateway.md should hold, between its continuity-fields markers:\n${table}`);
    expect(normalize(shown)).toEqual(normalize(table));
  });
});
