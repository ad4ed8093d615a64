// `rollscope tokenize`: token ids of a text with their pieces, exactly as the model's tokenizer
// encodes it (no special tokens added; special-token text becomes its id).
import { parse, UsageError, type Command } from '../command.ts';
import { tokenizeText, type TokenInfo } from '../../analysis/ask.ts';
import { visiblePiece } from '../../profiles/tokenizer.ts';
import { paint } from '../output.ts';
import { answering, MODEL_USAGE, readInputText, requireModel } from './render.ts';

/** `index  id  piece` lines; whitespace made visible (⏎ · →), special tokens marked. */
export function tokenTable(tokens: readonly TokenInfo[]): string {
  const idWidth = Math.max(2, ...tokens.map((t) => String(t.id).length));
  const indexWidth = Math.max(1, String(tokens.length - 1).length);
  return tokens
    .map((t, i) => {
      const piece = visiblePiece(t.piece);
      return `${String(i).padStart(indexWidth)}  ${String(t.id).padStart(idWidth)}  ${t.special ? paint.bold(piece) : piece}${t.special ? paint.dim('  (special)') : ''}\n`;
    })
    .join('');
}

export const command: Command = {
  name: 'tokenize',
  summary: 'token ids of a text with their pieces (whitespace and special tokens visible)',
  usage: `rollscope tokenize --model M [--json] [TEXT|-]

Encodes TEXT (or stdin, byte for byte: "echo" adds a newline, "printf" does not) with the model's
tokenizer, as transformers' tokenizer(text, add_special_tokens=False) and vLLM do.

${MODEL_USAGE}
  --json             {"text", "token_ids", "tokens": [{"id", "piece", "special"}]}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      model: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    if (positionals.length > 1) throw new UsageError('tokenize takes one TEXT argument (quote it), or - for stdin');
    return answering('tokenize', async () => {
      const profile = requireModel(values.model);
      const arg = positionals[0];
      const text = arg !== undefined && arg !== '-' ? arg : readInputText(arg, 'TEXT').text;
      const result = await tokenizeText(profile, text);
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        process.stdout.write(paint.dim(`${result.token_ids.length} tokens (${profile.name})\n`));
        process.stdout.write(tokenTable(result.tokens));
      }
      return 0;
    });
  },
};
