// The loss mask a token stream implies by its chat structure: inside an assistant turn's
// content the model generated the tokens (mask 1); turn headers, the `\n` after `<|im_end|>`
// and every system/user/tool turn are context (mask 0). The assistant's `<|im_end|>` may be
// either: generated when the model stopped, added by the framework when the turn was cut by
// length. Independent of how an importer split turns, so it catches shifted masks in any format.
import type { SpecialTokens } from '../profiles/profile.ts';

/** Per token: 1 must be trained, 0 must not, -1 either. Tokens before `from` are all -1 (prompt history). */
export function expectedMask(tokens: readonly number[], special: SpecialTokens, from = 0): Int8Array {
  const out = new Int8Array(tokens.length).fill(-1);
  let i = 0;
  let role: 'assistant' | 'other' | 'none' = 'none';
  while (i < tokens.length) {
    const t = tokens[i]!;
    if (t === special.imStart) {
      let j = i + 1;
      while (j < tokens.length && tokens[j] !== special.newline && tokens[j] !== special.imStart && j - i < 8) j++;
      role = tokens[i + 1] === special.assistantRole ? 'assistant' : 'other';
      for (let h = i; h <= Math.min(j, tokens.length - 1); h++) out[h] = 0;
      i = j + 1;
      continue;
    }
    // A turn the model ended with the secondary EOS (`<|endoftext|>`) is closed by it: the `\n` after it is context.
    if (t === special.endOfText && role === 'assistant' && tokens[i + 1] === special.newline) {
      out[i] = 1;
      out[i + 1] = 0;
      role = 'none';
      i += 2;
      continue;
    }
    if (t === special.imEnd) {
      out[i] = role === 'assistant' ? -1 : 0;
      if (tokens[i + 1] === special.newline) out[i + 1] = 0;
      role = 'none';
      i += tokens[i + 1] === special.newline ? 2 : 1;
      continue;
    }
    out[i] = role === 'assistant' ? 1 : role === 'other' ? 0 : -1;
    i++;
  }
  for (let k = 0; k < Math.min(from, out.length); k++) out[k] = -1;
  return out;
}
