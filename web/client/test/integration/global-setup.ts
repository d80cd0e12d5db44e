// Builds the tether binary from this repository and starts a real
// `tether serve` for the integration tests; stops it afterwards.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    tetherUrl: string;
  }
}

const repo = resolve(import.meta.dirname, '../../../..');

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.unref();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => ok(port));
    });
  });
}

async function waitReady(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`tether exited with ${child.exitCode}:\n${log()}`);
    try {
      const res = await fetch(`${url}/readyz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`tether did not become ready:\n${log()}`);
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'tether-client-it-'));
  const bin = join(dir, 'tether');
  execFileSync('go', ['build', '-o', bin, './cmd/tether'], { cwd: repo, stdio: 'inherit' });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let out = '';
  const child = spawn(
    bin,
    ['serve', '--addr', `127.0.0.1:${port}`, '--data', join(dir, 'data'), '--heartbeat', '200ms', '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  await waitReady(url, child, () => out);
  project.provide('tetherUrl', url);
  return async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
}
