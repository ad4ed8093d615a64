// `rollscope decode`: the text token ids stand for, as the model's tokenizer decodes them.
import { parse, type Command } from '../command.ts';
import { decodeIds, parseTokenIds } from '../../analysis/ask.ts';
import { paint } from '../output.ts';
import { answering, MODEL_USAGE, readInputText, requireModel } from './render.ts';
import { tokenTable } from './tokenize.ts';

export const command: Command = {
  name: 'decode',
  summary: 'decode token ids back to text (optionally skipping special tokens)',
  usage: `rollscope decode --model M [--skip-special-tokens] [--tokens] [--json] IDS...|-

IDS are whole numbers separated by spaces or commas ("9707 11 1879", "[9707, 11, 1879]"); - reads
them from stdin. Prints the decoded text, as transformers' tokenizer.decode(ids) gives it,
followed by a newline; --json has the exact text and each token's piece.

Exit status: 0 on success; 2 when an id is not a whole number or is outside the vocabulary.

${MODEL_USAGE}
  --skip-special-tokens
                     leave out special tokens (turn tokens, image pads…), as decode(…, skip_special_tokens=True)
  --tokens           also list each id with its piece
  --json             {"token_ids", "skip_special_tokens", "text", "tokens": [{"id", "piece", "special"}]}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      model: { type: 'string' },
      'skip-special-tokens': { type: 'boolean', default: false },
      tokens: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    return answering('decode', async () => {
      const profile = requireModel(values.model);
      const words =
        positionals.length === 0 || (positionals.length === 1 && positionals[0] === '-')
          ? [readInputText(positionals[0], 'IDS').text]
          : positionals;
      const ids = parseTokenIds(words, profile);
      const result = await decodeIds(profile, ids, { skipSpecialTokens: values['skip-special-tokens'] === true });
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        process.stdout.write(`${result.text}\n`);
        if (values.tokens) {
          process.stdout.write(paint.dim(`── ${ids.length} tokens ──\n`));
          process.stdout.write(tokenTable(result.tokens));
        }
      }
      return 0;
    });
  },
};
