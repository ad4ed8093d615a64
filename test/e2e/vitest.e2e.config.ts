import { defineConfig } from 'vitest/config';

// Browser end-to-end tests: the real server (child process) and the built app in Debian's chromium.
export default defineConfig({
  test: {
    root: '.',
    include: ['test/e2e/**/*.e2e.ts'],
    // Hang bounds, not budgets: on a loaded 2-core machine a page can take tens of seconds to settle.
    // `expect.poll` waits up to a minute (vitest's default, 1 s, made a slow CI a failing one).
    testTimeout: 240_000,
    hookTimeout: 240_000,
    expect: { poll: { timeout: 60_000 } },
    fileParallelism: false,
  },
});
