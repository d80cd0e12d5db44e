// Fails if web/app/static/ is not exactly what the sources build: the page
// is committed (so `go run ./cmd/tether serve` needs no Node), and this
// check keeps it from going stale.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const committed = join(root, 'static');
const fresh = mkdtempSync(join(tmpdir(), 'tether-app-bundle-'));
try {
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs'), fresh, '--quiet'], { stdio: 'inherit' });
  const want = readdirSync(fresh).sort();
  const have = readdirSync(committed).sort();
  const problems = [];
  for (const f of new Set([...want, ...have])) {
    if (!want.includes(f)) problems.push(`${f}: in static/ but not built by the sources`);
    else if (!have.includes(f)) problems.push(`${f}: built by the sources but missing from static/`);
    else if (!readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)))) problems.push(`${f}: differs from a fresh build`);
  }
  if (problems.length > 0) {
    console.error('web/app/static/ is not up to date with web/app/src/:');
    for (const p of problems) console.error(`  ${p}`);
    console.error('Run `npm run build -w app` in web/ and commit web/app/static/.');
    process.exit(1);
  }
  console.log(`web/app/static/ is up to date (${want.join(', ')})`);
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
