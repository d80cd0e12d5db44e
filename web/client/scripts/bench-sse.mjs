// The cost of one large frame, read in pieces as a browser hands a body
// over: the SSE parser of every stream (a thread's snapshot is one frame)
// and the AI SDK stream's parser (a message created whole is one chunk).
// Usage: node scripts/bench-sse.mjs (from web/client); figures in
// docs/benchmarks.md.
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = await build({
  absWorkingDir: root,
  stdin: { contents: `export { SSEParser } from './src/sse.ts'; export { parseUIStream } from './src/ai-sdk-stream.ts';`, resolveDir: root, loader: 'ts' },
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  write: false,
});
const { SSEParser, parseUIStream } = await import(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0].contents).toString('base64')}`);

const PIECE = 16 * 1024;
for (const mib of [1, 8, 32]) {
  const frame = new TextEncoder().encode(`id: 1\ndata: ${JSON.stringify({ type: 'text-delta', id: 'a', delta: 'x'.repeat(mib * 1024 * 1024) })}\n\n`);
  const pieces = [];
  for (let i = 0; i < frame.length; i += PIECE) pieces.push(frame.subarray(i, i + PIECE));

  let t = performance.now();
  let frames = 0;
  const p = new SSEParser(() => frames++);
  const dec = new TextDecoder();
  for (const b of pieces) p.feed(dec.decode(b, { stream: true }));
  const sse = performance.now() - t;

  const body = new ReadableStream({ start: (c) => (pieces.forEach((b) => c.enqueue(b)), c.close()) });
  t = performance.now();
  for await (const _ of parseUIStream(body)) frames++;
  const ui = performance.now() - t;
  if (frames !== 2) throw new Error(`${frames} frames, not 2`);
  console.log(`${mib} MiB frame in 16 KiB pieces: SSEParser ${sse.toFixed(0)} ms, parseUIStream ${ui.toFixed(0)} ms`);
}
