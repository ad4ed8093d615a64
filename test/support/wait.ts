// The one way a test waits for another process (a server, a child, a job) to reach a state: poll a
// condition until it holds. Never a sleep that guesses how long something takes, never an
// assertion on how long it took: the deadline only turns a hang into a clear failure, and it is
// far beyond any real wait so a slow CI machine does not fail a test that would have passed.
// test/determinism.test.ts allows `setTimeout` in test/ here and nowhere else (see its list).

export interface WaitOptions {
  /** Give up after this long (a hang, not a slow machine). */
  timeoutMs?: number;
  /** Poll this often. */
  everyMs?: number;
}

/** Polls `probe` until it returns a value other than undefined (or false), and returns it. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  opts: WaitOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const everyMs = opts.everyMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
