#!/usr/bin/env node
// Runs a TypeScript script (bench, fixture generators) through tsx: `node bin/tsx.js file.ts args...`.
import { register } from 'tsx/esm/api';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
register();
const [script, ...rest] = process.argv.slice(2);
process.argv = [process.argv[0], script, ...rest];
await import(pathToFileURL(path.resolve(script)).href);
