// The shared page (server/http/share-page.ts) and the run's models, on the real demo run with one
// record moved to Qwen2-VL (three models in one run): the page holds exactly what the HTTP routes
// answer, inlines the app with a CSP that forbids the network, and the run info names each model.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiffResult, ListQuery, RunInfo, SharedTrajectory, TokenStream, TrajectoryDetail } from '../server/http/api.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { checkPaths } from '../server/pipeline.ts';
import { DEMO_FILE, writeDemoRun } from '../server/demo/write.ts';
import {
  AppNotBuilt,
  SHARED_DATA_ELEMENT,
  shareFileName,
  shareHtml,
  sharedTrajectory,
  UnknownTrajectory,
  writeFileAtomic,
} from '../server/http/share-page.ts';

const ID = 'geo-003-dup-eos';
let dir: string;
let appDir: string;
let store: RunStore;
let server: RunningServer;

/** An app build with the hazards an inlined script must survive: `</script>`, `<!--`, and `$'`/`$&` (replacement patterns). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: the text a script may hold, `${…}` included, inlined unchanged
const APP_JS = "globalThis.__shared = ['</script>', `</SCRIPT>${1}`, '<!-- x -->', \"$'\", '$&'];\n";
const APP_CSS = '.tok { color: red; }\n';

async function get(p: string): Promise<Response> {
  return fetch(server.url + p.replace(/^\//, ''));
}

function embedded(html: string): SharedTrajectory {
  const m = new RegExp(`<script type="application/json" id="${SHARED_DATA_ELEMENT}"[^>]*>(.*?)</script>`, 's').exec(
    html,
  );
  if (!m) throw new Error('no embedded data');
  return SharedTrajectory.parse(JSON.parse(m[1]!));
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-share-'));
  await writeDemoRun(dir);
  // One record of another model generation: the run now holds three.
  const file = path.join(dir, DEMO_FILE);
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const at = lines.findIndex((l) => l.includes('"id":"geo-001-clean"'));
  lines[at] = lines[at]!.replace('"model":"Qwen/Qwen2.5-VL-7B-Instruct"', '"model":"Qwen/Qwen2-VL-7B-Instruct"');
  fs.writeFileSync(file, lines.join('\n'));

  appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-share-app-'));
  fs.mkdirSync(path.join(appDir, 'assets'));
  fs.writeFileSync(path.join(appDir, 'assets', 'index-1.js'), APP_JS);
  fs.writeFileSync(path.join(appDir, 'assets', 'index-1.css'), APP_CSS);
  fs.writeFileSync(
    path.join(appDir, 'index.html'),
    `<!doctype html>
<html lang="en">
  <head>
    <meta charset="UTF-8" />
    <title>rollscope</title>
    <link rel="icon" href="data:," />
    <script type="module" crossorigin src="/assets/index-1.js"></script>
    <link rel="stylesheet" crossorigin href="/assets/index-1.css">
  </head>
  <body>
    <div id="root"></div>
  </body>
</html>
`,
  );
  store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
});

afterAll(async () => {
  await server?.close();
});

describe('the run names each model', () => {
  it('GET /api/run counts trajectories per model profile, with the model names the records state', async () => {
    const expected = new Map<string, { n: number; names: Set<string> }>();
    for await (const ev of checkPaths([dir], {})) {
      if (ev.type !== 'trajectory') continue;
      const e = expected.get(ev.checked.profile.name) ?? { n: 0, names: new Set<string>() };
      e.n++;
      if (ev.checked.trajectory.model) e.names.add(ev.checked.trajectory.model);
      expected.set(ev.checked.profile.name, e);
    }
    expect([...expected.keys()].sort()).toEqual(['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl']);
    const info = RunInfo.parse(await (await get('/api/run')).json());
    expect(info.models.map((m) => m.profile)).toEqual(
      [...expected.entries()].sort((a, b) => b[1].n - a[1].n).map(([p]) => p),
    );
    for (const m of info.models) {
      expect(m.trajectories, m.profile).toBe(expected.get(m.profile)!.n);
      expect(m.names, m.profile).toEqual([...expected.get(m.profile)!.names].sort());
    }
    expect(info.models.find((m) => m.profile === 'qwen2-vl')).toEqual({
      profile: 'qwen2-vl',
      trajectories: 1,
      names: ['Qwen/Qwen2-VL-7B-Instruct'],
      limitation: null,
      notes: [],
    });
    expect(info.models.reduce((n, m) => n + m.trajectories, 0)).toBe(info.trajectories);
  });
});

describe('the shared page', () => {
  it('holds what the HTTP routes answer for the trajectory: detail, every stream, every diff, the image previews', async () => {
    const data = await sharedTrajectory(store, ID);
    const enc = encodeURIComponent(ID);
    expect(data.detail).toEqual(TrajectoryDetail.parse(await (await get(`/api/trajectories/${enc}`)).json()));
    expect(Object.keys(data.streams).sort()).toEqual(data.detail.streams.map((s) => `${s.name}:${s.turn}`).sort());
    for (const s of data.detail.streams) {
      const answer = TokenStream.parse(
        await (await get(`/api/trajectories/${enc}/stream?name=${s.name}&turn=${s.turn}`)).json(),
      );
      expect(data.streams[`${s.name}:${s.turn}`], `${s.name}:${s.turn}`).toEqual(answer);
    }
    expect(Object.keys(data.diffs).sort()).toEqual(data.detail.diffs.map((d) => `${d.a}:${d.b}:${d.turn}`).sort());
    for (const d of data.detail.diffs) {
      const answer = DiffResult.parse(
        await (await get(`/api/trajectories/${enc}/diff?a=${d.a}&b=${d.b}&turn=${d.turn}`)).json(),
      );
      expect(data.diffs[`${d.a}:${d.b}:${d.turn}`]).toEqual(answer);
    }
    // The duplicated <|im_end|> is a divergence the page holds.
    expect(Object.values(data.diffs).some((d) => d.divergence?.cause === 'duplicated_eos')).toBe(true);
    const withPreview = data.detail.images.filter((i) => i.hasPreview);
    expect(withPreview.length).toBeGreaterThan(0);
    for (const img of withPreview) {
      const png = Buffer.from(
        await (await get(`/api/trajectories/${enc}/images/${img.index}/preview?w=720`)).arrayBuffer(),
      );
      expect(data.previews[img.index]).toBe(`data:image/png;base64,${png.toString('base64')}`);
    }
    // The page's run is the one trajectory.
    expect(data.run.trajectories).toBe(1);
    expect(data.list.items.map((s) => s.id)).toEqual([ID]);
    expect(data.run.models).toEqual([
      { profile: 'qwen2.5-vl', trajectories: 1, names: ['Qwen/Qwen2.5-VL-7B-Instruct'], limitation: null, notes: [] },
    ]);
  });

  it('inlines the app (scripts intact, each allowed by its hash) and a CSP that allows no request', async () => {
    const data = await sharedTrajectory(store, ID);
    const html = shareHtml(data, appDir);
    expect(embedded(html)).toEqual(data);
    // Nothing is loaded from anywhere: no src/href but data: and fragments.
    expect(
      [...html.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((m) => m[1]).filter((u) => !u!.startsWith('data:')),
    ).toEqual([]);
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)"/
      .exec(html)?.[1]
      ?.replace(/&#39;|&quot;/g, "'");
    expect(csp).toBeDefined();
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'none'");
    expect(csp).toContain('img-src data:');
    expect(csp).not.toMatch(/https?:|\*|'self'/);
    // Every executable inline script is allowed by its hash, and there are exactly those.
    const scripts = [...html.matchAll(/<script(?: type="module")?>(.*?)<\/script>/gs)].map((m) => m[1]!);
    expect(scripts.length).toBe(2);
    for (const code of scripts) expect(csp).toContain(`'sha256-${createHash('sha256').update(code).digest('base64')}'`);
    // The app's code survives inlining: it still means the same JS (`<\/` is `</`, `\x21` is `!`).
    const appCode = scripts[1]!;
    expect(appCode).not.toMatch(/<\/script|<!--/i);
    const evaluate = (code: string) => {
      new Function(code)();
      return (globalThis as { __shared?: unknown }).__shared;
    };
    expect(evaluate(appCode)).toEqual(evaluate(APP_JS));
    expect(evaluate(appCode)).toEqual(['</script>', '</SCRIPT>1', '<!-- x -->', "$'", '$&']);
    expect(html).toContain(`<style>${APP_CSS}</style>`);
    // The page opens at the diff of the first divergence.
    expect(html).toContain(`data-open="#/t/${ID}?view=diff&amp;a=prompt&amp;b=prompt&amp;dturn=1"`);
  });

  it('record text cannot break out of the embedded data or the attributes', async () => {
    const data = await sharedTrajectory(store, ID);
    const hostile = '</script><script>alert(1)</script><!-- " onload="x() &amp;';
    const tampered: SharedTrajectory = {
      ...data,
      id: hostile,
      detail: { ...data.detail, notes: [...data.detail.notes, hostile] },
    };
    const html = shareHtml(tampered, appDir);
    expect(embedded(html)).toEqual(tampered);
    expect(html).not.toContain('<script>alert(1)');
    expect(html).not.toContain('" onload="');
    // The elements are the page's own: one data block, the boot script, the app.
    expect(html.match(/<script\b/g)?.length).toBe(3);
  });

  it('GET /api/trajectories/ID/share downloads the same page', async () => {
    const res = await get(`/api/trajectories/${encodeURIComponent(ID)}/share`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${shareFileName(ID)}"`);
    const fromRoute = embedded(await res.text());
    const direct = await sharedTrajectory(store, ID);
    expect({ ...fromRoute, createdAt: '' }).toEqual({ ...direct, createdAt: '' });
  });

  it('an unknown id names ids the run holds; a missing build says what to run', async () => {
    const err = await sharedTrajectory(store, 'geo-999').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnknownTrajectory);
    expect((err as Error).message).toMatch(/no trajectory with id "geo-999".*\d+ trajectories.*"geo-001-clean"/);
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-noapp-'));
    const data = await sharedTrajectory(store, ID);
    expect(() => shareHtml(data, empty)).toThrow(AppNotBuilt);
    expect(() => shareHtml(data, empty)).toThrow(/npm run build/);
    expect((await get('/api/trajectories/nope/share')).status).toBe(404);
  });

  it('`rollscope share` with an unknown id exits 2 listing ids; an existing --out is refused without --force', () => {
    const out = path.join(dir, 'page.html');
    const unknown = spawnSync(process.execPath, ['bin/rollscope.js', 'share', 'geo-999', dir, '--out', out], {
      encoding: 'utf8',
    });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/no trajectory with id "geo-999".*"geo-001-clean"/);
    expect(fs.existsSync(out)).toBe(false);
    fs.writeFileSync(out, 'mine');
    const refused = spawnSync(process.execPath, ['bin/rollscope.js', 'share', ID, dir, '--out', out], {
      encoding: 'utf8',
    });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/exists; pass --force/);
    expect(fs.readFileSync(out, 'utf8')).toBe('mine');
  });

  it('`rollscope share --where` shares the first match and says how many matched', () => {
    const out = path.join(dir, 'where.html');
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['bin/rollscope.js', 'share', ...args], { encoding: 'utf8' });
    const shared = run('--where', 'kind:prefix_break and reward >= 1', dir, '--out', out);
    expect(shared.stderr).toBe('');
    expect(shared.status).toBe(0);
    const first = store.list(
      ListQuery.parse({ where: 'kind:prefix_break and reward >= 1', sort: 'file', order: 'asc' }),
    );
    expect(first.total).toBeGreaterThan(1);
    expect(shared.stdout).toContain(`${first.total} trajectories matched kind:prefix_break and reward >= 1`);
    expect(embedded(fs.readFileSync(out, 'utf8')).id).toBe(first.items[0]!.id);
    const none = run('--where', 'reward > 100', dir, '--out', path.join(dir, 'none.html'));
    expect(none.status).toBe(2);
    expect(none.stdout).toContain('0 trajectories matched');
    expect(none.stderr).toMatch(/no trajectory .* matches --where reward > 100/);
    const bad = run('--where', 'reward >= 1 and kind:nope', dir, '--out', path.join(dir, 'bad.html'));
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('unknown kind "nope"');
    expect(bad.stderr).toContain('  reward >= 1 and kind:nope\n                       ^');
  });

  it('writes through a temporary file and a rename, replacing only with force', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-write-'));
    const file = path.join(folder, 'p.html');
    writeFileAtomic(file, 'one', false);
    expect(() => writeFileAtomic(file, 'two', false)).toThrow(/exists/);
    expect(fs.readFileSync(file, 'utf8')).toBe('one');
    writeFileAtomic(file, 'three', true);
    expect(fs.readFileSync(file, 'utf8')).toBe('three');
    expect(fs.readdirSync(folder)).toEqual(['p.html']);
  });
});
