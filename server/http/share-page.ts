// One trajectory as a single self-contained HTML file, for a bug report: the built app (dist/app)
// inlined, and the answers to every API call its trajectory page makes (detail, each stream, each
// diff, image previews as data: URLs), computed by the same views the HTTP routes use and embedded
// as JSON that the app's static transport answers from (app/api.ts). Nothing is fetched: a
// Content-Security-Policy that allows only the page's own inline scripts and data: images forbids
// every network request. `rollscope share` writes it; the trajectory page's Share button downloads it.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SharedTrajectory, type RunInfo } from './api.ts';
import type { RunStore } from './store.ts';
import { facetsOf } from './serve/list-query.ts';
import { conversation } from './views-messages.ts';
import { NotFound, tokenDiff, tokenStream, trajectoryDetail, withGroupFindings } from './views.ts';
import { previewPng } from './preview.ts';

/** The built app `npm run build` (and npm's `prepare`) writes. */
export const APP_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/app');

/** Width of the embedded image previews: the image panel's (the pad-run chips scale it down). */
export const SHARED_PREVIEW_WIDTH = 720;

/** The id of the page's embedded JSON (read by app/api.ts). */
export const SHARED_DATA_ELEMENT = 'rollscope-shared';

export class AppNotBuilt extends Error {}

/** A trajectory id the run does not hold; `known` names a few it does. */
export class UnknownTrajectory extends Error {
  constructor(
    readonly id: string,
    readonly known: readonly string[],
    readonly total: number,
  ) {
    super(
      `no trajectory with id "${id}" in this run${
        known.length > 0
          ? `; it holds ${total} trajectories, e.g. ${known.map((k) => `"${k}"`).join(', ')}${total > known.length ? ', …' : ''}`
          : ' (it holds no trajectories)'
      }`,
    );
  }
}

const streamKey = (name: string, turn: number) => `${name}:${turn}`;
const diffKey = (a: string, b: string, turn: number) => `${a}:${b}:${turn}`;

/** What the shared page holds of trajectory `id` of `store`'s run (loaded: await `store.ready` first). */
export async function sharedTrajectory(store: RunStore, id: string): Promise<SharedTrajectory> {
  const summary = store.summary(id);
  if (!summary) {
    const list = store.list({ sort: 'id', order: 'asc', offset: 0, limit: 5 });
    throw new UnknownTrajectory(
      id,
      list.items.map((s) => s.id),
      list.total,
    );
  }
  const checked = await store.get(id);
  if (!checked) throw new NotFound(`trajectory "${id}" is no longer in ${summary.source.file}`);
  const opts = store.options();
  const detail = withGroupFindings(trajectoryDetail(summary, checked, opts), store.groupFindings(id));
  const streams: SharedTrajectory['streams'] = {};
  for (const s of detail.streams) streams[streamKey(s.name, s.turn)] = tokenStream(checked, s.name, s.turn, opts);
  const diffs: SharedTrajectory['diffs'] = {};
  for (const d of detail.diffs) {
    try {
      diffs[diffKey(d.a, d.b, d.turn)] = await tokenDiff(checked, d);
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }
  const messages = conversation(checked, opts);
  const previews: SharedTrajectory['previews'] = {};
  for (const img of detail.images) {
    if (!img.hasPreview) continue;
    try {
      const png = await previewPng(checked.trajectory, img.index, SHARED_PREVIEW_WIDTH, store.roots());
      previews[img.index] = `data:image/png;base64,${png.toString('base64')}`;
    } catch {
      // Unreadable bytes: the page shows the image as unavailable, as the server would.
    }
  }
  const info = store.info();
  const one = (counts: Record<string, number>) => Object.fromEntries(Object.keys(counts).map((k) => [k, 1]));
  // The shared page's run is this one trajectory.
  const run: RunInfo = {
    paths: [summary.source.file],
    files: [{ file: summary.source.file, format: summary.format, trajectories: 1 }],
    trajectories: 1,
    counts: {
      kind: one(summary.findings.kind),
      cause: one(summary.findings.cause),
      severity: one(summary.findings.severity),
    },
    health: { ok: 0, warning: 0, error: 0, [summary.health]: 1 },
    stated: {
      step: summary.step === null ? 0 : 1,
      group: summary.group === null ? 0 : 1,
      advantage: summary.advantage === null ? 0 : 1,
      reward: summary.reward === null ? 0 : 1,
      status: summary.status === null && summary.finishReason === null ? 0 : 1,
    },
    profile: info.profile,
    builtinProfiles: [],
    models: [
      {
        ...(info.models.find((m) => m.profile === detail.profile) ?? { limitation: null, notes: [] }),
        profile: detail.profile,
        trajectories: 1,
        names: detail.model ? [detail.model] : [],
      },
    ],
    errors: [],
    demo: info.demo,
    loading: false,
    revision: 0,
  };
  // Validated as the routes validate what they send: the page must hold what the app expects.
  return SharedTrajectory.parse({
    version: 1,
    id,
    createdAt: new Date().toISOString(),
    run,
    list: { total: 1, offset: 0, items: [summary], facets: facetsOf([summary]) },
    detail,
    messages,
    streams,
    diffs,
    previews,
  });
}

/** Where the page opens: the diff of the first divergence when the trajectory has one, else its token stream. */
export function openingHash(data: SharedTrajectory): string {
  const diverging = data.detail.diffs.find((d) => d.diverges && data.diffs[diffKey(d.a, d.b, d.turn)]);
  const params = diverging ? `view=diff&a=${diverging.a}&b=${diverging.b}&dturn=${diverging.turn}` : 'view=stream';
  return `#/t/${encodeURIComponent(data.id)}?${params}`;
}

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

const escapeAttribute = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Script text made safe inside `<script>…</script>`: `</script` would end the element and `<!--`
 * would change how the HTML parser reads the rest. `\/` and `\x21` mean `/` and `!` in JS strings,
 * template literals and regular expressions alike.
 */
const inlineScript = (code: string) => code.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\x21--');

function readAsset(appDir: string, ref: string): string {
  const file = path.resolve(appDir, `.${new URL(ref, 'http://app/').pathname}`);
  if (!file.startsWith(appDir + path.sep) || !fs.existsSync(file))
    throw new AppNotBuilt(`the built app refers to ${ref}, which is not in ${appDir}: run \`npm run build\` again`);
  return fs.readFileSync(file, 'utf8');
}

/** The built app's index.html, or AppNotBuilt saying what to run. */
export function requireBuiltApp(appDir = APP_DIR): string {
  const index = path.join(appDir, 'index.html');
  if (!fs.existsSync(index))
    throw new AppNotBuilt(
      `the app is not built (no ${path.relative(process.cwd(), index) || index}): run \`npm run build\` in the rollscope folder, then share again`,
    );
  return index;
}

/** The page: dist/app/index.html with its script and stylesheet inlined, the data embedded, and a CSP that forbids the network. */
export function shareHtml(data: SharedTrajectory, appDir = APP_DIR): string {
  const index = requireBuiltApp(appDir);
  const root = path.resolve(appDir);
  let html = fs.readFileSync(index, 'utf8');
  const scripts: string[] = [];
  html = html.replace(/<script\b[^>]*\bsrc="([^"]+)"[^>]*><\/script>\s*/g, (_, src: string) => {
    scripts.push(inlineScript(readAsset(root, src)));
    return '';
  });
  html = html.replace(/<link\b[^>]*\brel="stylesheet"[^>]*>/g, (tag) => {
    const href = /\bhref="([^"]+)"/.exec(tag)?.[1];
    if (!href) return '';
    const css = readAsset(root, href);
    if (/url\((?!\s*['"]?data:)/i.test(css) || /@import/i.test(css))
      throw new AppNotBuilt(`the app's stylesheet ${href} refers to another file; a shared page cannot inline it`);
    return `<style>${css.replace(/<\/(style)/gi, '<\\/$1')}</style>`;
  });
  if (scripts.length === 0) throw new AppNotBuilt(`no script in ${index}: run \`npm run build\` again`);
  const leftover = /\b(?:src|href)="(?!data:|#)([^"]*)"/.exec(html);
  if (leftover) throw new AppNotBuilt(`${index} refers to ${leftover[1]}, which a shared page cannot inline`);

  // Run before the app reads the address: open the shared trajectory unless the address names one already.
  const boot = `(function(){var d=document.getElementById('${SHARED_DATA_ELEMENT}');if(d&&!/^#\\/t\\//.test(location.hash))location.replace(d.getAttribute('data-open'));})();`;
  const csp = [
    "default-src 'none'",
    `script-src ${[boot, ...scripts].map(sha256).join(' ')}`,
    "style-src 'unsafe-inline'",
    'img-src data:',
    "connect-src 'none'",
    "font-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  // JSON with every `<` escaped cannot end its element or open a comment.
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  const head =
    `<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(csp)}" />\n` +
    `    <meta name="rollscope-shared" content="${escapeAttribute(data.id)}" />\n`;
  const body =
    `<script type="application/json" id="${SHARED_DATA_ELEMENT}" data-open="${escapeAttribute(openingHash(data))}">${json}</script>\n` +
    `    <script>${boot}</script>\n` +
    scripts.map((s) => `    <script type="module">${s}</script>\n`).join('');
  html = html.replace(/<meta charset="UTF-8" \/>\s*/i, (m) => `${m}${head}    `);
  html = html.replace(/<title>[^<]*<\/title>/, () => `<title>${escapeAttribute(data.id)} · rollscope</title>`);
  if (!html.includes('http-equiv="Content-Security-Policy"'))
    throw new AppNotBuilt(`${index} has no <meta charset="UTF-8" /> to put the page's CSP after`);
  // A replacer function: the inlined code holds `$'` and `$&`, which a replacement string would expand.
  return html.replace('</body>', () => `${body}  </body>`);
}

/** A file name for the page of trajectory `id` (the characters a file system may refuse replaced). */
export function shareFileName(id: string): string {
  return `rollscope-${id.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 120)}.html`;
}

/** The page of trajectory `id` of `store`'s run: data and app together. */
export async function sharePage(store: RunStore, id: string, appDir = APP_DIR): Promise<string> {
  return shareHtml(await sharedTrajectory(store, id), appDir);
}

/** Write `text` to `file` through a temporary file in the same folder and a rename, so no reader sees half a page. */
export function writeFileAtomic(file: string, text: string, force: boolean): void {
  if (!force && fs.existsSync(file)) throw new Error(`${file} exists; pass --force to overwrite it`);
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, text, { flag: 'wx' });
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}
