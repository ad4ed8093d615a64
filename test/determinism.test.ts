// No test is left to chance: the suite draws no unseeded random number, sleeps on no guessed delay,
// asserts no duration, and skips nothing under CI for a missing tool. A test that needs another
// process to reach a state waits for that state (test/support/wait.ts `waitFor`, the engine
// stand-in's `hold()` / `received()`); a clock that matters is injected (`now`); fast-check draws
// from the one seed of test/support/property-seed.ts (`npm run fuzz` tries fresh ones).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testNamePattern } from './support/property-seed.ts';

const TEST_DIR = path.dirname(fileURLToPath(import.meta.url));

/**
 * Where a timer is allowed in test/, and why. Every other `setTimeout`, `setInterval` or
 * Playwright `waitForTimeout` in a test is a sleep that guesses how long something takes.
 */
const TIMERS_ALLOWED: Record<string, string> = {
  'support/wait.ts': 'the one poll: waits for a condition, its deadline only bounds a hang',
  'support/gateway-harness.ts': 'a deadline on a child gateway printing its address (a hang, not a sleep)',
  'distributed.test.ts':
    'watches a shard for its temporary file to SIGKILL it in that state (a condition polled, not a delay)',
  'security-records.test.ts': 'samples memory for a printed figure while a read runs; asserts no time',
};

/** Test sources: .ts files under test/, fixtures' generators included, this file excluded. */
function testSources(): { rel: string; lines: string[] }[] {
  const files = fs.readdirSync(TEST_DIR, { recursive: true, encoding: 'utf8' });
  return files
    .filter((f) => f.endsWith('.ts') && !f.includes('node_modules') && f !== 'determinism.test.ts')
    .map((rel) => ({
      rel: rel.split(path.sep).join('/'),
      lines: fs.readFileSync(path.join(TEST_DIR, rel), 'utf8').split('\n'),
    }));
}

/** `file:line: text` of every line that matches, comments included (a commented-out sleep is still a smell). */
function hits(pattern: RegExp, allowed: (rel: string) => boolean = () => false): string[] {
  return testSources().flatMap(({ rel, lines }) =>
    allowed(rel) ? [] : lines.flatMap((l, i) => (pattern.test(l) ? [`test/${rel}:${i + 1}: ${l.trim()}`] : [])),
  );
}

describe('no test is left to chance', () => {
  it('draws no unseeded random number (a seeded PRNG: server/util/random.ts mulberry32)', () => {
    expect(hits(/Math\.random\s*\(|crypto\.randomInt|randomUUID\(/)).toEqual([]);
  });

  it('sleeps on no timer outside the allow-list', () => {
    expect(hits(/\bset(Timeout|Interval)\s*\(|\.waitForTimeout\s*\(/, (rel) => rel in TIMERS_ALLOWED)).toEqual([]);
  });

  it('every allowed timer is still there (a stale entry hides nothing)', () => {
    const sources = new Map(testSources().map((s) => [s.rel, s.lines.join('\n')]));
    for (const rel of Object.keys(TIMERS_ALLOWED))
      expect(/\bset(Timeout|Interval)\s*\(/.test(sources.get(rel) ?? ''), rel).toBe(true);
  });

  it('asserts no duration', () => {
    // An expect() over a clock reading, or over a variable named for elapsed time.
    const clock =
      /expect\([^;]*(Date\.now\(\)|performance\.now\(\)|process\.hrtime|\belapsed|\bduration|\btookMs|\bmillis)/i;
    expect(hits(clock)).toEqual([]);
  });

  it('skips nothing under CI for a missing tool: every skipIf/runIf names process.env.CI', () => {
    // Conditions over a case's own parameters, not over the machine: they skip nothing by chance.
    const parameterOnly = [/^test\/video\.test\.ts:\d+: it\.runIf\(name !== 'Qwen2\.5-VL'\)/]; // EVS is Qwen3-VL's on
    const conditional = hits(/\.(skipIf|runIf)\s*\(/).filter(
      (h) => !h.includes('process.env.CI') && !parameterOnly.some((p) => p.test(h)),
    );
    expect(conditional).toEqual([]);
    expect(hits(/\b(it|describe|test)\.(skip|only|todo)\s*\(/)).toEqual([]);
  });

  it('lets fast-check take its seed from the suite: no property or sample states its own', () => {
    // A stated seed never changes under `npm run fuzz`; the suite's one seed is property-seed.ts's.
    const seeded = testSources().flatMap(({ rel, lines }) => {
      const text = lines.join('\n');
      return [...text.matchAll(/fc\.(assert|check|sample)\(/g)].flatMap((m) => {
        // The call's options object closes within a few hundred characters of the call's end.
        const call = text.slice(m.index, m.index + 4000);
        return /\bseed\s*:/.test(call.slice(0, call.indexOf('\n    );') > 0 ? call.indexOf('\n    );') : 600))
          ? [`test/${rel}: fc.${m[1]} with its own seed`]
          : [];
      });
    });
    expect(seeded).toEqual([]);
  });

  it('the grep above would see the patterns it forbids (it is not vacuous)', () => {
    expect(/\bset(Timeout|Interval)\s*\(/.test('await new Promise((r) => setTimeout(r, 50));')).toBe(true);
    expect(/Math\.random\s*\(/.test('x = Math.random()')).toBe(true);
    expect(testSources().length).toBeGreaterThan(100);
  });
});

describe('the replay command a failing property prints', () => {
  it('selects its test by a -t pattern that survives the shell and vitest’s regular expression', () => {
    const names = [
      "fuzzing the 'vllm (calls grouped by id)' importer > random and mutated records: no crash, an error or a trajectory per record, valid records unaffected",
      'demo > the store selects what check --where lists, for random expressions',
      'a [bracketed] name with $ and * and + and ? > 1.5 ^ | \\ end',
    ];
    for (const name of names) {
      // What bash hands vitest for -t '…'.
      const arg = spawnSync('bash', ['-c', `printf %s '${testNamePattern(name)}'`], { encoding: 'utf8' }).stdout;
      const joined = name.split(' > ').join(' ');
      expect(new RegExp(arg).test(joined), `${arg} selects ${joined}`).toBe(true);
      expect(new RegExp(arg).test(joined.replace(/.$/, '')), 'an exact pattern').toBe(false);
    }
  });
});
