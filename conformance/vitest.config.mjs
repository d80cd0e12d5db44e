import { defineConfig } from "vitest/config"

// The suite talks to a server started by scripts/conformance (TETHER_URL).
export default defineConfig({
  test: {
    include: ["*.test.mjs"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // One file at a time: both talk to the same server, and the suite's
    // timing tests (TTLs of one or two seconds) need a server that is not
    // also serving another file.
    fileParallelism: false,
  },
})
