// Reports the size of the core client (without the React part), minified
// and gzipped, as an app bundler would ship it; and what the React hooks and
// the WebSocket transport add.
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

async function bundle(contents) {
  const out = await build({
    absWorkingDir: root,
    stdin: { contents, resolveDir: root, loader: 'ts' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    external: ['react'],
    legalComments: 'none',
    write: false,
  });
  const bytes = out.outputFiles[0].contents;
  return { min: bytes.length, gz: gzipSync(bytes, { level: 9 }).length };
}

const kb = (n) => `${(n / 1024).toFixed(1)} kB`;
const core = await bundle(`export * from './src/index.ts';`);
const all = await bundle(`export * from './src/index.ts'; export * from './src/react.ts';`);
const ws = await bundle(`export * from './src/index.ts'; export * from './src/websocket.ts';`);
// 18 kB: 15 until the thread state (JSON Patch, 3.4 kB) and token
// refresh (1.8 kB) came into the core, 17 until REST writes were retried
// safely (0.4 kB) and subscriptions learned to take a transport (0.3 kB);
// scripts/test enforces it.
const budget = 18 * 1024;
console.log(`core (@tether/client):      ${kb(core.min)} minified, ${kb(core.gz)} gzipped (${core.gz} bytes; budget ${kb(budget)})`);
console.log(`with React hooks (/react):  ${kb(all.min)} minified, ${kb(all.gz)} gzipped (hooks add ${all.gz - core.gz} bytes)`);
console.log(`with WebSocket (/websocket): ${kb(ws.min)} minified, ${kb(ws.gz)} gzipped (the transport adds ${ws.gz - core.gz} bytes)`);
if (core.gz > budget) {
  console.error('the core client is over its size budget');
  process.exit(1);
}
