/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The app is a thin view over the server's API; in `npm run dev` the API is proxied
// to a `rollscope serve --no-open --port 4874` started separately.
export default defineConfig({
  root: 'app',
  plugins: [react()],
  build: { outDir: '../dist/app', emptyOutDir: true },
  server: { proxy: { '/api': 'http://127.0.0.1:4874' } },
  test: {
    root: '.',
    include: ['test/**/*.test.ts'],
    // One fast-check seed for every property (test/support/property-seed.ts).
    setupFiles: ['test/support/property-seed.ts'],
    // Hang bounds, not budgets: a loaded 2-core machine runs some integration tests for minutes.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
