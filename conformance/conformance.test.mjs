// The official Durable Streams conformance suite, run against the server
// at TETHER_URL. Its own CLI finds no tests when the package is installed
// under node_modules (vitest excludes node_modules), so it is called here.
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.TETHER_URL
if (!baseUrl) {
  throw new Error("TETHER_URL is not set: run scripts/conformance")
}

runConformanceTests({
  baseUrl,
  // Must match the server's --long-poll-timeout.
  longPollTimeoutMs: Number(process.env.TETHER_LONG_POLL_MS ?? 2000),
  // Without this the six subscription tests are skipped, not passed.
  subscriptions: true,
})
