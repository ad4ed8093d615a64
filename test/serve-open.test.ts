// `rollscope serve` where no browser can be opened (issue 33 #17): a server, a container, CI. It
// says on stderr that it opened none and why, and gives the address to open instead; it keeps
// serving.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('serve without a display', () => {
  it('says it opened no browser, why, and the address to open', async () => {
    const env = { ...process.env };
    delete env.DISPLAY;
    delete env.WAYLAND_DISPLAY;
    // No PATH: the embedded demo run. No --no-open: it tries to open a browser.
    const child = spawn(process.execPath, ['bin/rollscope.js', 'serve', '--port', '0'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const said = await new Promise<{ url: string; err: string }>((resolve, reject) => {
        let out = '';
        let err = '';
        const check = () => {
          const url = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1];
          if (url && err.includes(url)) resolve({ url, err });
        };
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          check();
        });
        child.stderr!.on('data', (d: Buffer) => {
          err += d.toString();
          check();
        });
        child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err || out}`)));
      });
      expect(said.err).toContain(
        `rollscope: no browser opened (no display: DISPLAY and WAYLAND_DISPLAY are unset): open ${said.url} in a browser`,
      );
      // Still serving: the address answers.
      expect((await fetch(`${said.url}api/run`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
