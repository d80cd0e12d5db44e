// Builds the tether binary from this repository and starts a real
// `tether serve` for the integration tests; stops it afterwards.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    tetherUrl: string;
    /** A second server that takes user tokens (JWTs) signed HS256 with tetherJwtSecret. */
    tetherJwtUrl: string;
    tetherJwtSecret: string;
    /** The tether binary, for tests that start (and stop) a server of their own. */
    tetherBin: string;
  }
}

const JWT_SECRET = 'integration-hmac-secret-of-more-than-32-bytes';

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
  const servers: ChildProcess[] = [];
  const start = async (name: string, extra: string[]): Promise<string> => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    let out = '';
    const child = spawn(
      bin,
      ['serve', '--addr', `127.0.0.1:${port}`, '--data', join(dir, name), '--heartbeat', '200ms', '--log-level', 'warn', ...extra],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    servers.push(child);
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    await waitReady(url, child, () => out);
    return url;
  };
  const stop = async () => {
    for (const child of servers) {
      if (child.exitCode !== null) continue;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    project.provide('tetherUrl', await start('data', []));
    writeFileSync(join(dir, 'jwt-secret'), `${JWT_SECRET}\n`);
    project.provide('tetherJwtUrl', await start('data-jwt', ['--jwt-secret-file', join(dir, 'jwt-secret')]));
    project.provide('tetherJwtSecret', JWT_SECRET);
    project.provide('tetherBin', bin);
  } catch (err) {
    await stop();
    throw err;
  }
  return stop;
}
