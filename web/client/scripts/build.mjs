// Builds dist/: ESM bundles of the entry points (index, react, …) sharing one
// chunk, and .d.ts declarations from tsc.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
rmSync(join(root, 'dist'), { recursive: true, force: true });

await build({
  absWorkingDir: root,
  entryPoints: { index: 'src/index.ts', react: 'src/react.ts', 'ai-sdk': 'src/ai-sdk.ts', 'ag-ui': 'src/ag-ui.ts', websocket: 'src/websocket.ts' },
  outdir: 'dist',
  bundle: true,
  splitting: true, // the react entry shares the core's chunk: one TetherClient class, not two
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  external: ['react', 'ai', '@ag-ui/client', 'rxjs'],
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'info',
});

// typescript may be hoisted to the workspace root: resolve it like node does.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
  cwd: root,
  stdio: 'inherit',
});
console.log('dist/: index.js, react.js, ai-sdk.js, ag-ui.js, websocket.js (+ shared chunk), .d.ts declarations');
