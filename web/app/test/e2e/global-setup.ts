// Builds the tether binary once for all page tests, checks that Chromium is
// there, and empties the screenshots folder (artifacts/screenshots/ at the
// repository root).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    tetherBin: string;
    chromium: string;
    screenshots: string;
  }
}

const repo = resolve(import.meta.dirname, '../../../..');

export default function setup(project: TestProject): () => void {
  const chromium = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
  if (!existsSync(chromium)) {
    throw new Error(`Chromium not found at ${chromium}: install Debian's chromium (apt-get install -y chromium; scripts/test does it as root) or set CHROMIUM_PATH`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'tether-app-e2e-'));
  const bin = join(dir, 'tether');
  execFileSync('go', ['build', '-o', bin, './cmd/tether'], { cwd: repo, stdio: 'inherit' });
  const screenshots = process.env.TETHER_SCREENSHOTS || join(repo, 'artifacts', 'screenshots');
  rmSync(screenshots, { recursive: true, force: true });
  mkdirSync(screenshots, { recursive: true });
  project.provide('tetherBin', bin);
  project.provide('chromium', chromium);
  project.provide('screenshots', screenshots);
  return () => rmSync(dir, { recursive: true, force: true });
}
