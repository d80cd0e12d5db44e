import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // @ag-ui/client's runHttpRequest rethrows, from its teardown, the error
    // of a body that a cut already broke: an unhandled rejection
    // ("terminated") every time the plain HttpAgent is cut, which the AG-UI
    // integration test does on purpose. (TetherAgent reads bodies itself.)
    onUnhandledError: (err) => !(err?.name === 'TypeError' && /terminated|network error \(wire: cut\)/.test(err.message ?? '')),
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/**/*.test.{ts,tsx}'],
          exclude: ['test/integration/**'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          testTimeout: 30_000,
          // One server for all files, and tests that count its open streams.
          fileParallelism: false,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
