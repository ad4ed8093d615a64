import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  parse,
  positiveInt,
  processorOptions,
  UsageError,
  workerCount,
  type Command,
  trainerSidecars,
  TRAINER_USAGE,
} from '../command.ts';
import { openRunStore } from '../../http/store.ts';
import { startServer } from '../../http/server.ts';
import { needsToken, newToken } from '../../http/gate.ts';
import { openTrainedSide } from '../../http/trained-side.ts';
import { openAgainstSide } from '../../http/against.ts';
import { checkedReport } from '../diff-runs.ts';
import { defaultRoots } from '../../pipeline.ts';

const DEFAULT_PORT = 4874;
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** The embedded demo run, written to a fresh folder under the system temp dir. */
async function writeDemo(): Promise<string> {
  // A literal specifier, so the bundle (bin/bundle.js) carries the demo as its own chunk, loaded only here.
  const { writeDemoRun } = await import('../../demo/write.ts');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-demo-'));
  await writeDemoRun(dir);
  return dir;
}

/**
 * Open `url` in the desktop's browser; when there is none to open (no display, no opener: a
 * server, a container, CI), say so on stderr with the address to open instead.
 */
function openBrowser(url: string): void {
  const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer.exe' : 'xdg-open';
  const cannot = (why: string) => {
    process.stderr.write(`rollscope: no browser opened (${why}): open ${url} in a browser\n`);
  };
  if (process.platform === 'linux' && !process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) {
    cannot('no display: DISPLAY and WAYLAND_DISPLAY are unset');
    return;
  }
  try {
    const child = spawn(opener, [url], { stdio: 'ignore', detached: true });
    child.on('error', (e) => cannot(`${opener}: ${(e as NodeJS.ErrnoException).code ?? e.message}`));
    child.on('exit', (code) => {
      if (code !== 0 && code !== null) cannot(`${opener} exited with status ${code}`);
    });
    child.unref();
  } catch (e) {
    cannot(`${opener}: ${(e as Error).message}`);
  }
}

export const command: Command = {
  name: 'serve',
  summary: 'open the browser inspector on trajectories (or the embedded demo run)',
  usage: `rollscope serve [PATH...] [--model M] [--port N] [--host H] [--no-open] [--min-pixels N] [--max-pixels N]
                [--workers N] [--allow-remote-images] [--require-token] [--trained PATH]... [--against PATH]...

Starts the inspector on http://127.0.0.1:${DEFAULT_PORT}/ (the next free port when that one is
taken) and opens it in a browser. Without PATH it serves the embedded demo run. A folder PATH
loads every trajectory file in it and picks up records appended while it runs.

  --port N         port to listen on (0 = any free port)
  --host H         address to bind (default 127.0.0.1). Any other address than 127.0.0.1,
                   localhost or ::1 gets a random token, printed in the URL at start (as Jupyter
                   does): open that URL once (the token becomes a cookie), or send
                   Authorization: Bearer TOKEN. Anyone with the token can read these rollouts.
  --require-token  a token on 127.0.0.1 too: on a shared machine every local user can connect
                   to a loopback port
  --no-open        do not open a browser
  --trained PATH   what the trainer was given (an export, a slime/verl batch or train dump): opens
                   the compare view of each rollout trajectory against it, joined as
                   \`rollscope compare\` joins them (docs/compare.md); repeatable
  --against PATH   another run of the same prompts (after a fix, a checkpoint, an engine upgrade): loads it
                   too and opens the run against it (#/against), paired as \`rollscope diff-runs\` pairs
                   them; each pair side by side at token level (docs/diff-runs.md); repeatable
${TRAINER_USAGE}
  --model M        a built-in profile (qwen2.5-vl, qwen3-vl, qwen2.5, qwen3, …), a model name, or a local model folder
  --format F       override format detection
  --min-pixels N   image processor min_pixels for this run
  --max-pixels N   image processor max_pixels for this run
  --workers N      analysis threads for reading large runs (default: one per idle core for reads of 512 MB or
                   more on three idle cores or more, else none; 0 = main thread only)
  --allow-remote-images
                   fetch http(s) images the records name (off: they are marked unavailable). Only
                   public addresses, 10 s, 64 MiB, image/* only, redirects re-checked (docs/security.md)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      model: { type: 'string' },
      format: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      'no-open': { type: 'boolean', default: false },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      workers: { type: 'string' },
      'allow-remote-images': { type: 'boolean', default: false },
      'require-token': { type: 'boolean', default: false },
      trained: { type: 'string', multiple: true },
      against: { type: 'string', multiple: true },
      trainer: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h', default: false },
    });
    const portArg =
      values.port === undefined ? DEFAULT_PORT : values.port === '0' ? 0 : positiveInt('port', values.port)!;
    if (portArg > 65535) throw new UsageError(`--port must be at most 65535, got ${portArg}`);
    const appDir = path.join(repoRoot, 'dist/app');
    if (!fs.existsSync(path.join(appDir, 'index.html'))) {
      // Only a checkout can lack it: the package carries the built app (package.json `files`).
      process.stderr.write(
        `rollscope: the app is not built in ${repoRoot}: run \`npm run build\` there first (npm ci builds it too)\n`,
      );
      return 2;
    }
    const demo = positionals.length === 0;
    const paths = demo ? [await writeDemo()] : positionals;
    for (const p of paths) if (!fs.existsSync(p)) throw new UsageError(`no such file or directory: ${p}`);
    const trainedPaths = values.trained ?? [];
    if (demo && trainedPaths.length > 0) throw new UsageError('--trained needs a ROLLOUT path to compare it with');
    for (const p of trainedPaths) if (!fs.existsSync(p)) throw new UsageError(`no such file or directory: ${p}`);
    const againstPaths = values.against ?? [];
    if (demo && againstPaths.length > 0) throw new UsageError('--against needs a PATH to compare it with');
    for (const p of againstPaths) if (!fs.existsSync(p)) throw new UsageError(`no such file or directory: ${p}`);
    const trainer = await trainerSidecars(values.trainer);
    const store = openRunStore(paths, {
      ...(trainer.side ? { trainer: trainer.side } : {}),
      model: values.model,
      format: values.format,
      processor: processorOptions(values),
      demo,
      allowRemoteImages: values['allow-remote-images'] === true,
      // Unset: the threads check would start for the run (server/pipeline.ts workersFor).
      workers: values.workers === undefined ? undefined : workerCount(values.workers),
    });
    const runOptions = { model: values.model, format: values.format, processor: processorOptions(values) };
    const trained =
      trainedPaths.length > 0
        ? openTrainedSide(paths, trainedPaths, runOptions, defaultRoots(trainedPaths))
        : undefined;
    const against =
      againstPaths.length > 0
        ? openAgainstSide(
            paths,
            againstPaths,
            openRunStore(againstPaths, {
              model: values.model,
              format: values.format,
              processor: processorOptions(values),
              allowRemoteImages: values['allow-remote-images'] === true,
              workers: values.workers === undefined ? undefined : workerCount(values.workers),
            }),
            async (p) =>
              (
                await checkedReport(p, {
                  ...runOptions,
                  allowRemoteImages: values['allow-remote-images'] === true,
                  ...(trainer.side ? { trainer: trainer.side } : {}),
                })
              ).report,
          )
        : undefined;
    const host = values.host ?? '127.0.0.1';
    // Beyond the loopback names other users (or machines) can connect: a token, as Jupyter does.
    const token = needsToken(host) || values['require-token'] ? newToken() : undefined;
    const server = await startServer({
      store,
      port: portArg,
      host,
      appDir,
      fallbackPort: values.port === undefined,
      token,
      trained,
      against,
    });
    process.stdout.write(
      `rollscope serving ${demo ? 'the demo run' : paths.join(', ')}${trained ? ` against ${trainedPaths.join(', ')}` : ''}${against ? ` against the run ${againstPaths.join(', ')}` : ''} at ${server.openUrl}\n`,
    );
    if (token) {
      process.stderr.write(
        `rollscope: listening on ${host}: every request needs the token in the URL above (then a cookie) or Authorization: Bearer ${token}\n`,
      );
    }
    if (!values['no-open'])
      openBrowser(against ? `${server.openUrl}#/against` : trained ? `${server.openUrl}#/compare` : server.openUrl);
    await new Promise<void>((resolve) => {
      const stop = () => {
        void server.close().then(resolve);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    return 0;
  },
};
