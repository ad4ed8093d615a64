// What a serving stack's chat endpoint hands the chat template for the messages (and tools) of a
// request: vLLM's `parse_chat_messages` and SGLang's `_apply_jinja_template`, reproduced
// (docs/reference/chat-templates.md, "What vLLM hands the template" and "SGLang"). The same messages
// render differently through them than through transformers' `apply_chat_template`, which renders
// them as given: `content: null` is an empty parts list for vLLM and "" for SGLang (the Qwen3-VL
// template's `for` over it raises on None), a string content is a one-part list for vLLM (so an
// empty string is a non-empty list), image parts become `{"type": "image"}`, tool results made of
// text parts become one string, tool-call arguments given as JSON text become objects.
//
// Messages may be plain JavaScript data or what `parsePythonJson` returns (`Map`, `PyFloat`,
// `bigint`); each normalized dict is of the kind it came as, and arguments decoded from JSON text
// are decoded as Python's json.loads decodes them, so the template prints them as the server's
// would. What the server would refuse (its request validation, an unsupported part) is kept as
// written and reported to `onRejected`: a log holds only requests the server accepted, so the data
// is rendered as far as it goes; `rollscope render --as vllm` turns a rejection into an error.
import { parsePythonJson, PyFloat } from '../profiles/python-literal.ts';
import type { ContentFormat } from '../profiles/template.ts';

export type { ContentFormat } from '../profiles/template.ts';

/** Something the server would refuse, at `field` (`messages[2].content[0]`, `tools[1]`). */
export interface RequestRejection {
  field: string;
  reason: string;
}

export interface NormalizeOptions {
  /**
   * How the server passes `content` to the template: `openai` (a list of parts) when the template
   * loops over `message['content']`, else `string` (ChatTemplate.contentFormat detects it as vLLM
   * does). Default `openai`, the format of every Qwen-VL template.
   */
  contentFormat?: ContentFormat;
  onRejected?: (rejection: RequestRejection) => void;
}

type Dict = Map<string, unknown> | Record<string, unknown>;

function isDict(v: unknown): v is Dict {
  if (v instanceof Map) return true;
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof PyFloat);
}

function get(d: Dict, key: string): unknown {
  if (d instanceof Map) return d.get(key);
  return Object.hasOwn(d, key) ? d[key] : undefined;
}

function has(d: Dict, key: string): boolean {
  return d instanceof Map ? d.has(key) : Object.hasOwn(d, key);
}

/** Python's `None`: JSON null, or a key that is not there. */
const isNone = (v: unknown): v is null | undefined => v === null || v === undefined;

/** A dict of the kind `like` is (a Map stays a Map), from entries in order. */
function dictLike(like: unknown, entries: readonly (readonly [string, unknown])[]): Dict {
  return like instanceof Map ? new Map(entries) : Object.fromEntries(entries);
}

/** `d` with `key` set (in its place when present, appended otherwise), as a new dict. */
function withKey(d: Dict, key: string, value: unknown): Dict {
  if (d instanceof Map) return new Map(d).set(key, value);
  return { ...d, [key]: value };
}

/** Python truthiness of a JSON value. */
function pyTruthy(v: unknown): boolean {
  if (isNone(v) || v === false || v === '' || v === 0 || v === 0n) return false;
  if (v instanceof PyFloat) return v.value !== 0;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  if (isDict(v)) return Object.keys(v).length > 0;
  return true;
}

class Rejected extends Error {}

const reject = (reason: string): never => {
  throw new Rejected(reason);
};

// ---------------------------------------------------------------------------------------------
// vLLM (vllm-project/vllm vllm/entrypoints/chat_utils.py; the request model's message validator in
// vllm/entrypoints/openai/chat_completion/protocol.py)

/** Part types vLLM's `MM_PARSER_MAP` knows, with the key its content is read from. */
const VLLM_TEXT_PARTS: Readonly<Record<string, string>> = {
  text: 'text',
  input_text: 'text',
  output_text: 'text',
  refusal: 'refusal',
  thinking: 'thinking',
};
const VLLM_MEDIA_PARTS: Readonly<Record<string, 'image' | 'audio' | 'video' | 'embeds'>> = {
  image_url: 'image',
  input_image: 'image',
  image_pil: 'image',
  image_embeds: 'image',
  audio_url: 'audio',
  input_audio: 'audio',
  audio_embeds: 'audio',
  video_url: 'video',
};
/** Keys a part without `type` is recognised by, in the order vLLM tries them (`_parse_chat_message_content_mm_part`). */
const VLLM_UNTYPED_KEYS = ['image_url', 'image_pil', 'image_embeds', 'audio_embeds', 'prompt_embeds', 'audio_url'];

/** A `{"url": str}` object (the image_url / audio_url / video_url parts vLLM validates), else a rejection. */
function urlObject(part: Dict, key: string): unknown {
  const v = get(part, key);
  if (!isDict(v) || typeof get(v, 'url') !== 'string') reject(`"${key}" must be an object {"url": "..."}`);
  return get(v as Dict, 'url');
}

/** vLLM's (part type, content) for a dict part (`_parse_chat_message_content_mm_part`). */
function vllmPartType(part: Dict): [string, unknown] {
  const type = get(part, 'type');
  const uuid = get(part, 'uuid');
  if (typeof type === 'string' && isNone(uuid)) {
    const textKey = VLLM_TEXT_PARTS[type];
    if (textKey !== undefined) return [type, get(part, textKey)];
    switch (type) {
      case 'image_url':
      case 'audio_url':
      case 'video_url':
        return [type, urlObject(part, type)];
      case 'input_image':
        return [type, get(part, 'image_url')];
      case 'image_pil':
      case 'image_embeds':
      case 'audio_embeds':
      case 'input_audio':
        return [type, get(part, type)];
      case 'prompt_embeds':
        return [type, get(part, 'data')];
      case 'tool_reference':
        return [type, get(part, 'name')];
    }
  }
  if (isNone(type) || !isNone(uuid)) {
    for (const key of VLLM_UNTYPED_KEYS) {
      if (!has(part, key)) continue;
      const v = get(part, key);
      if (key === 'prompt_embeds') return [key, get(part, 'data')];
      return [key, isDict(v) ? get(v, 'url') : v];
    }
    if (!isNone(get(part, 'input_audio'))) return ['input_audio', get(part, 'input_audio')];
    if (has(part, 'video_url')) {
      const v = get(part, 'video_url');
      return ['video_url', isDict(v) ? get(v, 'url') : v];
    }
    if (has(part, 'tool_reference')) return ['tool_reference', get(part, 'name')];
    return reject("Missing 'type' field in multimodal part.");
  }
  if (typeof type !== 'string') return reject("Invalid 'type' field in multimodal part.");
  return [type, undefined];
}

/**
 * One content part as vLLM passes it to an "openai"-format template, or null when vLLM skips it
 * (`_parse_chat_message_content_part` with `wrap_dicts`): text-like parts become
 * `{"type": "text", "text": …}`, media `{"type": "image" | "audio" | "video"}`.
 */
function vllmOpenAiPart(part: unknown, like: unknown): unknown | null {
  if (typeof part === 'string')
    return dictLike(like, [
      ['type', 'text'],
      ['text', part],
    ]);
  if (!isDict(part)) return reject('a content part must be a string or an object');
  const [type, content] = vllmPartType(part);
  if ((type === 'text' || type === 'refusal') && isNone(content)) return null;
  if (Object.hasOwn(VLLM_TEXT_PARTS, type))
    return dictLike(part, [
      ['type', 'text'],
      ['text', content],
    ]);
  const media = Object.hasOwn(VLLM_MEDIA_PARTS, type) ? VLLM_MEDIA_PARTS[type] : undefined;
  if (type === 'image_embeds' || type === 'audio_embeds')
    return reject(`${type} parts need a server started with --enable-mm-embeds`);
  if (media !== undefined) return dictLike(part, [['type', media]]);
  if (type === 'prompt_embeds') return reject('prompt_embeds parts need a server started with --enable-prompt-embeds');
  if (type === 'tool_reference')
    return dictLike(part, [
      ['type', 'tool_reference'],
      ['name', content],
    ]);
  return reject(`Unsupported chat content part type: '${type}'`);
}

/** The text of a part for a "string"-format template (texts are joined with "\n"), or null when skipped. */
function vllmStringPart(part: unknown): string | null {
  if (typeof part === 'string') return part;
  if (!isDict(part)) return reject('a content part must be a string or an object');
  const [type, content] = vllmPartType(part);
  if ((type === 'text' || type === 'refusal') && isNone(content)) return null;
  if (Object.hasOwn(VLLM_TEXT_PARTS, type)) return content as string;
  // The model's own placeholder string goes in front of the text: not modelled for string templates.
  return reject(`a ${type} part with a template that takes string content (the model's placeholder is not modelled)`);
}

type Reporter = (field: string, e: unknown) => void;

/** The content list vLLM iterates: None is no parts, a string one text part. */
function contentParts(content: unknown, like: unknown): unknown[] {
  if (isNone(content)) return [];
  if (typeof content === 'string')
    return [
      dictLike(like, [
        ['type', 'text'],
        ['text', content],
      ]),
    ];
  if (Array.isArray(content)) return content;
  return reject('content must be a string, a list of parts or null');
}

/** One message as vLLM's `_parse_chat_message_content` returns it (before `_postprocess_messages`). */
function vllmMessage(message: unknown, at: string, format: ContentFormat, report: Reporter): unknown {
  if (!isDict(message)) return reject('a message must be an object');
  const role = get(message, 'role');
  if (typeof role !== 'string') return reject('a message needs a "role"');
  const entries: [string, unknown][] = [['role', role]];
  let parts: unknown[];
  try {
    parts = contentParts(get(message, 'content'), message);
  } catch (e) {
    report(`${at}.content`, e);
    return message;
  }
  if (format === 'openai') {
    const out: unknown[] = [];
    parts.forEach((part, p) => {
      try {
        const normalized = vllmOpenAiPart(part, message);
        if (normalized !== null) out.push(normalized);
      } catch (e) {
        report(`${at}.content[${p}]`, e);
        out.push(part);
      }
    });
    entries.push(['content', out]);
  } else {
    const texts: string[] = [];
    parts.forEach((part, p) => {
      try {
        const text = vllmStringPart(part);
        if (text !== null) texts.push(text);
      } catch (e) {
        report(`${at}.content[${p}]`, e);
      }
    });
    entries.push(['content', texts.join('\n')]);
  }
  if (role === 'assistant') {
    const calls = get(message, 'tool_calls');
    if (!isNone(calls)) {
      if (Array.isArray(calls)) entries.push(['tool_calls', [...calls]]);
      else report(`${at}.tool_calls`, new Rejected('tool_calls must be a list'));
    }
    // The request model renames `reasoning_content` to `reasoning` when `reasoning` is not set.
    const reasoning = isNone(get(message, 'reasoning')) ? get(message, 'reasoning_content') : get(message, 'reasoning');
    if (!isNone(reasoning)) entries.push(['reasoning', reasoning], ['reasoning_content', reasoning]);
  } else if (role === 'tool') {
    if (has(message, 'tool_call_id')) entries.push(['tool_call_id', get(message, 'tool_call_id')]);
    const content = entries[1]![1];
    // Text-only tool results reach the template as one string ("\n" between parts).
    if (Array.isArray(content) && !content.some((item) => isDict(item) && get(item, 'type') !== 'text')) {
      const texts = content
        .filter((item) => isDict(item) && get(item, 'type') === 'text')
        .map((item) => get(item as Dict, 'text'));
      entries[1] = ['content', texts.length > 0 ? texts.map(pyStr).join('\n') : ''];
    }
  }
  const name = get(message, 'name');
  if (typeof name === 'string') entries.push(['name', name]);
  const task = get(message, 'task');
  if (typeof task === 'string') entries.push(['task', task]);
  if (role === 'developer') entries.push(['tools', get(message, 'tools') ?? null]);
  return dictLike(message, entries);
}

/** `str.join` needs strings: what Python would print for the odd non-string text. */
function pyStr(v: unknown): string {
  if (typeof v === 'string') return v;
  return reject('a text part whose "text" is not a string');
}

/**
 * Tool-call arguments as the template gets them (`_postprocess_messages`, current vLLM): an
 * object stays; JSON text is decoded, and text that is not a JSON object (invalid JSON, `null`,
 * `[1]`, `42`) becomes `{}`, as does a missing, empty or other value. Older versions raised on
 * invalid JSON, so a log holds such a call only from a version that coerces.
 */
function vllmArguments(args: unknown, like: unknown): unknown {
  const empty = () => dictLike(like, []);
  if (!pyTruthy(args)) return empty();
  if (isDict(args)) return args;
  if (typeof args !== 'string') return empty();
  let parsed: unknown;
  try {
    parsed = parsePythonJson(args);
  } catch {
    return empty();
  }
  // Decoded objects are Maps (key order and Python floats as json.loads has them), whatever `like` is.
  return isDict(parsed) ? parsed : empty();
}

function vllmToolCalls(message: Dict, at: string, report: Reporter): Dict {
  const calls = get(message, 'tool_calls');
  if (!Array.isArray(calls)) return message;
  if (calls.length === 0)
    return dictLike(
      message,
      [...entriesOf(message)].filter(([k]) => k !== 'tool_calls'),
    );
  const out = calls.map((call, c) => {
    const field = `${at}.tool_calls[${c}]`;
    if (!isDict(call)) {
      report(field, new Rejected('assistant tool_calls entries must be objects.'));
      return call;
    }
    const fn = get(call, 'function');
    const type = has(call, 'type') ? get(call, 'type') : 'function';
    if (type !== 'function' || !isDict(fn)) {
      report(
        field,
        new Rejected(`chat completions only support assistant tool_calls of type 'function' with a "function" object`),
      );
      return call;
    }
    return withKey(call, 'function', withKey(fn, 'arguments', vllmArguments(get(fn, 'arguments'), fn)));
  });
  return withKey(message, 'tool_calls', out);
}

function entriesOf(d: Dict): Iterable<[string, unknown]> {
  return d instanceof Map ? d.entries() : Object.entries(d);
}

function normalizeEach(
  messages: readonly unknown[],
  opts: NormalizeOptions,
  one: (message: unknown, at: string, report: Reporter) => unknown,
): unknown[] {
  const report: Reporter = (field, e) => {
    if (!(e instanceof Rejected)) throw e;
    opts.onRejected?.({ field, reason: e.message });
  };
  return messages.map((message, m) => {
    const at = `messages[${m}]`;
    try {
      return one(message, at, report);
    } catch (e) {
      report(at, e);
      return message;
    }
  });
}

/**
 * The messages of a chat request as vLLM's chat endpoint hands them to the template
 * (`parse_chat_messages`: `_parse_chat_message_content` per message, then `_postprocess_messages`).
 * Each message becomes `{role, content, tool_calls?, reasoning?, reasoning_content?,
 * tool_call_id?, name?}` (other keys are not passed on); the input is not modified.
 */
export function normalizeChatLikeVllm(messages: readonly unknown[], opts: NormalizeOptions = {}): unknown[] {
  const format = opts.contentFormat ?? 'openai';
  return normalizeEach(messages, opts, (message, at, report) => {
    const parsed = vllmMessage(message, at, format, report);
    return isDict(parsed) && parsed !== message ? vllmToolCalls(parsed, at, report) : parsed;
  });
}

/**
 * Tool definitions as vLLM passes them to the template (`tool.model_dump()` of its request model):
 * `{"type": "function", "function": {"name", "description", "parameters"}}` in that order, an
 * absent description or parameters as null, `strict` and `defer_loading` only when set.
 */
export function normalizeToolsLikeVllm(tools: readonly unknown[], opts: NormalizeOptions = {}): unknown[] {
  return tools.map((tool, t) => {
    const field = `tools[${t}]`;
    const fail = (reason: string) => {
      opts.onRejected?.({ field, reason });
      return tool;
    };
    if (!isDict(tool)) return fail('a tool must be an object');
    if (has(tool, 'type') && get(tool, 'type') !== 'function')
      return fail(`tools of type "${String(get(tool, 'type'))}" are not supported`);
    const fn = get(tool, 'function');
    if (!isDict(fn) || typeof get(fn, 'name') !== 'string')
      return fail('a tool needs a "function" object with a "name"');
    const description = get(fn, 'description') ?? null;
    const parameters = get(fn, 'parameters') ?? null;
    if (description !== null && typeof description !== 'string') return fail('"description" must be a string');
    if (parameters !== null && !isDict(parameters)) return fail('"parameters" must be an object');
    const deferTop = get(tool, 'defer_loading') ?? null;
    const strict = get(fn, 'strict') ?? null;
    const defer = get(fn, 'defer_loading') ?? deferTop;
    const function_ = dictLike(fn, [
      ['name', get(fn, 'name')],
      ['description', description],
      ['parameters', parameters],
      ...(strict !== null ? ([['strict', strict]] as const) : []),
      ...(defer !== null ? ([['defer_loading', defer]] as const) : []),
    ]);
    return dictLike(tool, [
      ['type', 'function'],
      ['function', function_],
      ...(deferTop !== null ? ([['defer_loading', deferTop]] as const) : []),
    ]);
  });
}

// ---------------------------------------------------------------------------------------------
// SGLang (sgl-project/sglang python/sglang/srt/entrypoints/openai/serving_chat.py
// `_apply_jinja_template`, `normalize_tool_content`, `normalize_assistant_tool_call_arguments`;
// python/sglang/srt/parser/jinja_template_utils.py `process_content_for_template_format`)

/** One message as SGLang's jinja path hands it to the template. */
function sglangMessage(message: unknown, at: string, format: ContentFormat, report: Reporter): unknown {
  if (!isDict(message)) return reject('a message must be an object');
  const role = get(message, 'role');
  if (typeof role !== 'string') return reject('a message needs a "role"');
  // Keys whose value is None are dropped; content None becomes "".
  const entries = [...entriesOf(message)].filter(([, v]) => !isNone(v));
  const content = isNone(get(message, 'content')) ? '' : get(message, 'content');
  const contentAt = entries.findIndex(([k]) => k === 'content');
  const setContent = (v: unknown) => {
    if (contentAt >= 0) entries[contentAt] = ['content', v];
    else entries.push(['content', v]);
  };
  if (Array.isArray(content)) {
    if (format === 'openai') {
      const parts: unknown[] = [];
      content.forEach((chunk, p) => {
        if (!isDict(chunk)) return;
        const type = get(chunk, 'type');
        if (type === 'image_url' || type === 'input_image') parts.push(dictLike(chunk, [['type', 'image']]));
        else if (type === 'video_url') parts.push(dictLike(chunk, [['type', 'video']]));
        else if (type === 'audio_url') parts.push(dictLike(chunk, [['type', 'audio']]));
        else if (type === 'text' || type === 'input_text') {
          if (!has(chunk, 'text')) report(`${at}.content[${p}]`, new Rejected('a text part without "text"'));
          parts.push(
            dictLike(chunk, [
              ['type', 'text'],
              ['text', get(chunk, 'text')],
            ]),
          );
        } else if (type === 'tool_reference') parts.push(chunk);
        // Any other part is left out.
      });
      // Content moves to the end of the message (the other keys first, as SGLang rebuilds it).
      const rest = entries.filter(([k]) => k !== 'content');
      entries.length = 0;
      entries.push(...rest, ['content', parts]);
    } else {
      const texts = content
        .filter((chunk) => isDict(chunk) && (get(chunk, 'type') === 'text' || get(chunk, 'type') === 'input_text'))
        .map((chunk) => get(chunk as Dict, 'text'));
      setContent(texts.length > 0 ? texts.map(pyStr).join(' ') : '');
    }
  } else setContent(content);
  const i = entries.findIndex(([k]) => k === 'content');
  const final = entries[i]![1];
  // Tool results made of text parts (or strings) only: one string, parts joined with " ".
  if (
    role === 'tool' &&
    Array.isArray(final) &&
    final.every((p) => typeof p === 'string' || (isDict(p) && get(p, 'type') === 'text'))
  ) {
    entries[i] = [
      'content',
      final.map((p) => (typeof p === 'string' ? p : pyStr(get(p as Dict, 'text') ?? ''))).join(' '),
    ];
  }
  const out = dictLike(message, entries);
  return sglangToolCalls(out, at, report);
}

/** String arguments are decoded and must be a JSON object (SGLang raises otherwise). */
function sglangToolCalls(message: Dict, at: string, report: Reporter): Dict {
  const calls = get(message, 'tool_calls');
  if (get(message, 'role') !== 'assistant' || !Array.isArray(calls)) return message;
  const out = calls.map((call, c) => {
    const fn = isDict(call) ? get(call, 'function') : undefined;
    if (!isDict(call) || !isDict(fn)) return call;
    const args = get(fn, 'arguments');
    if (!has(fn, 'arguments') || typeof args !== 'string') return call;
    let parsed: unknown;
    try {
      parsed = parsePythonJson(args);
    } catch {
      report(
        `${at}.tool_calls[${c}].function.arguments`,
        new Rejected('Assistant tool call function.arguments must be valid JSON.'),
      );
      return call;
    }
    if (!isDict(parsed)) {
      report(
        `${at}.tool_calls[${c}].function.arguments`,
        new Rejected('Assistant tool call function.arguments must be a JSON object.'),
      );
      return call;
    }
    return withKey(call, 'function', withKey(fn, 'arguments', parsed));
  });
  return withKey(message, 'tool_calls', out);
}

/** The messages of a chat request as SGLang's OpenAI-compatible server hands them to a Jinja template. */
export function normalizeChatLikeSglang(messages: readonly unknown[], opts: NormalizeOptions = {}): unknown[] {
  const format = opts.contentFormat ?? 'openai';
  return normalizeEach(messages, opts, (message, at, report) => sglangMessage(message, at, format, report));
}
