import { defineConfig } from 'vitest/config';

// Browser end-to-end tests: the real server (child process) and the built app in Debian's chromium.
export default defineConfig({
  test: {
    root: '.',
    include: ['test/e2e/**/*.e2e.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    fileParallelism: false,
  },
});
