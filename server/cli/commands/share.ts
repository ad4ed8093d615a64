// `rollscope share TRAJECTORY_ID PATH... --out FILE.html [--force]` (or `--where EXPR PATH...`): one trajectory as a single
// self-contained HTML page for a bug report (server/http/share-page.ts builds it; the trajectory page's
// Share button downloads the same page).
import fs from 'node:fs';
import { COMMON_USAGE, parse, processorOptions, UsageError, whereOption, type Command } from '../command.ts';
import { openRunStore } from '../../http/store.ts';
import { ListQuery } from '../../http/api.ts';
import { AppNotBuilt, requireBuiltApp, sharePage, UnknownTrajectory, writeFileAtomic } from '../../http/share-page.ts';

export const command: Command = {
  name: 'share',
  summary: 'write one trajectory as a self-contained HTML page (no server, no network) for a bug report',
  usage: `rollscope share TRAJECTORY_ID PATH... --out FILE.html [--force] [--model M] [--format F]
       rollscope share --where EXPR PATH... --out FILE.html [--force] [--model M] [--format F]

Checks the run in PATH... and writes trajectory TRAJECTORY_ID (the id \`check --json\` prints) as one
HTML file: its token streams, findings, diffs (opened at the first divergence) and images, with the
app inlined. It opens from disk in any browser and makes no network request. Needs the built app
(\`npm run build\`, which \`npm install\` runs).

With --where, the page is of the first trajectory (in the order the run is read) that EXPR selects
(docs/filter.md), and the command says how many matched.

Exit status: 0 when written; 2 on wrong arguments, an id the run does not hold, a filter nothing
matches, or a FILE that exists.

  --out FILE       where to write the page
  --where EXPR     share the first trajectory EXPR selects instead of naming an id
  --force          replace FILE if it exists
${COMMON_USAGE.split('\n')
  .filter((l) => !/^\s+--json\b/.test(l))
  .join('\n')}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      out: { type: 'string' },
      where: { type: 'string' },
      force: { type: 'boolean', default: false },
      model: { type: 'string' },
      format: { type: 'string' },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      'allow-remote-images': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    const where = whereOption(values.where);
    const [named, ...rest] = where ? [undefined, ...positionals] : positionals;
    const paths = rest as string[];
    if (!where && !named) throw new UsageError('share needs TRAJECTORY_ID (or --where EXPR) and at least one PATH');
    if (paths.length === 0) throw new UsageError('share needs at least one PATH');
    const out = values.out;
    if (!out) throw new UsageError('share needs --out FILE.html');
    if (fs.existsSync(out) && !values.force) throw new UsageError(`${out} exists; pass --force to overwrite it`);
    for (const p of paths) if (!fs.existsSync(p)) throw new UsageError(`no such file or directory: ${p}`);
    try {
      requireBuiltApp();
    } catch (e) {
      // Before checking the run: say at once what to run.
      process.stderr.write(`rollscope share: ${(e as Error).message}\n`);
      return 2;
    }
    const store = openRunStore(paths, {
      model: values.model,
      format: values.format,
      processor: processorOptions(values),
      allowRemoteImages: values['allow-remote-images'] === true,
      pollMs: 0,
    });
    try {
      await store.ready;
      let id = named;
      if (where) {
        // The overview's own filter: `share --where` shares what the overview's first row in load order would be.
        const matched = store.list(ListQuery.parse({ where: where.expression, sort: 'file', order: 'asc', limit: 1 }));
        process.stdout.write(
          `${matched.total} trajector${matched.total === 1 ? 'y' : 'ies'} matched ${where.expression}\n`,
        );
        id = matched.items[0]?.id;
        if (id === undefined) {
          process.stderr.write(
            `rollscope share: no trajectory of ${paths.join(' ')} matches --where ${where.expression}\n`,
          );
          return 2;
        }
      }
      const html = await sharePage(store, id!);
      writeFileAtomic(out, html, values.force === true);
      process.stdout.write(`wrote ${out} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB): trajectory ${id}\n`);
      return 0;
    } catch (e) {
      if (e instanceof UnknownTrajectory || e instanceof AppNotBuilt) {
        process.stderr.write(`rollscope share: ${e.message}\n`);
        return 2;
      }
      throw e;
    } finally {
      store.close();
    }
  },
};
