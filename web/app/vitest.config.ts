import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    alias: { '@tether/client': new URL('../client/src/index.ts', import.meta.url).pathname },
  },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/e2e/global-setup.ts'],
          // One browser and a few servers at a time on a 2-core machine.
          fileParallelism: false,
          testTimeout: 90_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
