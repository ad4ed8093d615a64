// A small real run for the server and browser tests, until the embedded demo run exists:
// trajectories built with the real tokenizer and template (test/support/build.ts), a real PNG
// diagram drawn with sharp, and one trajectory per failure the tests look for.
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { loadProfile } from '../../server/profiles/profile.ts';
import { findVisionSpans } from '../../server/analysis/vision-spans.ts';
import type { Trajectory } from '../../server/model/trajectory.ts';
import { buildTrajectory, geometryScript } from '../support/build.ts';

export const IDS = {
  clean: 'geo-clean',
  duplicatedEos: 'geo-duplicated-eos',
  wrongPads: 'geo-wrong-pads',
  truncated: 'geo-truncated',
} as const;

async function diagram(width: number, height: number): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
  <rect width="100%" height="100%" fill="#fdfcf7"/>
  <polygon points="120,400 520,400 120,100" fill="none" stroke="#1f3a93" stroke-width="6"/>
  <text x="90" y="430" font-size="36" font-family="sans-serif">B</text>
  <text x="530" y="430" font-size="36" font-family="sans-serif">C</text>
  <text x="90" y="95" font-size="36" font-family="sans-serif">A</text>
  <text x="60" y="260" font-size="30" font-family="sans-serif">3</text>
  <text x="310" y="450" font-size="30" font-family="sans-serif">4</text>
</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

const withImage = (t: Trajectory): Trajectory => ({ ...t, images: [{ url: 'diagram.png' }] });

/** Writes `run.rollscope.jsonl` and `diagram.png` into `dir`; returns the JSONL path. */
export async function writeFixtureRun(dir: string): Promise<string> {
  const profile = loadProfile('qwen2.5-vl');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'diagram.png'), await diagram(640, 480));
  const clean = withImage(await buildTrajectory(profile, geometryScript(IDS.clean), 'canonical'));
  const dup = withImage(await buildTrajectory(profile, geometryScript(IDS.duplicatedEos), 'legacy'));
  // Pads expanded for an 800×600 image while the file is 640×480: a wrong placeholder count.
  const wrongScript = { ...geometryScript(IDS.wrongPads), images: [{ width: 800, height: 600 }] };
  const wrong = withImage(await buildTrajectory(profile, wrongScript, 'canonical'));
  // The prompt cut inside the image's pad run (max_prompt_length truncation).
  const base = await buildTrajectory(
    profile,
    { ...geometryScript(IDS.truncated), turns: [{ answer: 'AC = 5.' }] },
    'canonical',
  );
  const prompt = base.turns[0]!.promptIds!;
  const span = findVisionSpans(prompt, profile)[0]!;
  const truncated: Trajectory = withImage({
    ...base,
    turns: [
      {
        ...base.turns[0]!,
        promptIds: prompt.slice(0, span.padStart + 200),
        generatedIds: undefined,
        generatedLogprobs: undefined,
      },
    ],
  });
  const file = path.join(dir, 'run.rollscope.jsonl');
  fs.writeFileSync(file, `${[clean, dup, wrong, truncated].map((t) => JSON.stringify(t)).join('\n')}\n`);
  return file;
}
