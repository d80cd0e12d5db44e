// @durable-streams/client, unmodified, against Tether: a thread log and a
// generic stream are read, the read is aborted, more is appended, and the
// read resumes from the saved offset. Every item must arrive exactly once,
// in order.
import { describe, expect, test } from "vitest"
import { DurableStream, stream } from "@durable-streams/client"

const base = process.env.TETHER_URL
if (!base) {
  throw new Error("TETHER_URL is not set: run scripts/conformance")
}

const unique = () => `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`

async function api(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return text ? JSON.parse(text) : null
}

// runToEnd starts a run of the built-in demo agent and waits for its end.
async function runToEnd(tid, prompt) {
  const run = await api("POST", `/v1/threads/${tid}/runs`, {
    input: { messages: [{ role: "user", content: prompt }] },
  })
  for (let i = 0; i < 200; i++) {
    const { run: r } = await api("GET", `/v1/runs/${run.id}`)
    if (["done", "error", "cancelled", "aborted"].includes(r.status)) return r
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`run ${run.id} did not end`)
}

// follow reads url live from offset until enough(items) holds at an
// up-to-date batch, then aborts the read. It returns the items and the
// offset to resume from.
async function follow(url, offset, live, enough, onItems = () => {}) {
  const controller = new AbortController()
  const res = await stream({ url, offset, live, signal: controller.signal })
  const items = []
  let last = offset
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${items.length} items`)), 15_000)
    res.subscribeJson(async (batch) => {
      items.push(...batch.items)
      last = batch.offset
      await onItems(items)
      if (batch.upToDate && enough(items)) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  controller.abort()
  return { items, offset: last }
}

describe("@durable-streams/client against Tether", () => {
  test("follows a thread log, aborts, and resumes from its offset exactly once", async () => {
    const tid = `interop-${unique()}`
    await api("POST", "/v1/threads", { id: tid })
    const run1 = await runToEnd(tid, "first question")
    const url = `${base}/v1/stream/threads/${tid}`

    const finished = (runId) => (items) => items.some((e) => e.type === "run.finished" && e.run_id === runId)
    const first = await follow(url, "-1", true, finished(run1.id))
    expect(first.items.length).toBeGreaterThan(2)
    expect(first.items[0].type).toBe("run.created")

    // More is appended while nobody reads.
    const run2 = await runToEnd(tid, "second question")

    const second = await follow(url, first.offset, true, finished(run2.id))
    expect(second.items.every((e) => e.run_id === run2.id)).toBe(true)
    expect(second.items[0].type).toBe("run.created")

    // Together: the whole log, each event once, in order.
    const all = [...first.items, ...second.items].map((e) => e.offset)
    const whole = await (await stream({ url, live: false })).json()
    expect(all).toEqual(whole.map((e) => e.offset))
    expect(new Set(all).size).toBe(all.length)
    expect([...all].sort()).toEqual(all)
    expect(second.offset).toBe(whole[whole.length - 1].offset)

    // Thread logs are read-only.
    const put = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    expect(put.status).toBe(405)
  })

  test("follows a generic stream over SSE, aborts, and resumes from its offset exactly once", async () => {
    const url = `${base}/v1/stream/interop/${unique()}`
    const handle = await DurableStream.create({ url, contentType: "application/json" })
    for (let n = 1; n <= 5; n++) await handle.append(JSON.stringify({ n }))

    const first = await follow(url, "-1", "sse", (items) => items.length >= 5)
    expect(first.items).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })))

    // Appended while nobody reads…
    await handle.append(JSON.stringify({ n: 6 }))
    await handle.append(JSON.stringify({ n: 7 }))
    // …and while the resumed read is live.
    let appended = false
    const second = await follow(url, first.offset, "sse", (items) => items.length >= 5, async (items) => {
      if (!appended && items.length >= 2) {
        appended = true
        for (let n = 8; n <= 10; n++) await handle.append(JSON.stringify({ n }))
      }
    })
    expect(second.items).toEqual([6, 7, 8, 9, 10].map((n) => ({ n })))

    // Resuming from the end gives nothing twice: a catch-up read is empty.
    const rest = await (await stream({ url, offset: second.offset, live: false })).json()
    expect(rest).toEqual([])
  })

  test("resumes a byte stream over long-poll", async () => {
    const url = `${base}/v1/stream/interop/${unique()}`
    const handle = await DurableStream.create({ url, contentType: "text/plain" })
    await handle.append("hello ")
    const res1 = await stream({ url, offset: "-1", live: false })
    expect(await res1.text()).toBe("hello ")
    const saved = res1.offset
    await handle.append("world")
    const res2 = await stream({ url, offset: saved, live: false })
    expect(await res2.text()).toBe("world")
  })
})

// A catch-up read (live: false) is one response: the reference client reads
// one answer and stops, so a server that paged its catch-up answers would
// hand it a prefix of any stream over a page (1 MiB here, before).
describe("@durable-streams/client reads a large stream whole with live: false", () => {
  const MB = 1 << 20

  test("a 5 MB JSON stream", async () => {
    const url = `${base}/v1/stream/interop/large-json-${unique()}`
    await DurableStream.create({ url, contentType: "application/json" })
    const pad = "x".repeat(1000)
    const want = []
    // Five appends of 1,000 messages of about 1 KB each: a POSTed array is
    // flattened one level, each element a message (the client's append
    // would send each batch as one message).
    for (let a = 0; a < 5; a++) {
      const batch = []
      for (let i = 0; i < 1000; i++) batch.push({ n: a * 1000 + i, pad })
      want.push(...batch)
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(batch) })
      expect(res.status).toBe(204)
    }
    const res = await stream({ url, offset: "-1", live: false })
    const got = await res.json()
    expect(JSON.stringify(got).length).toBeGreaterThan(5 * 1000 * 1000)
    expect(got.length).toBe(want.length)
    expect(got.map((m) => m.n)).toEqual(want.map((m) => m.n))
    expect(res.upToDate).toBe(true)
    // The answer ends at the tail: reading on from it gives nothing.
    const rest = await (await stream({ url, offset: res.offset, live: false })).json()
    expect(rest).toEqual([])
  })

  test("a 5 MB byte stream, as bytes and as text", async () => {
    const url = `${base}/v1/stream/interop/large-bytes-${unique()}`
    const handle = await DurableStream.create({ url, contentType: "application/octet-stream" })
    const want = new Uint8Array(5 * MB + 12345)
    for (let i = 0; i < want.length; i++) want[i] = (i * 7919 + (i >> 13)) & 0xff
    // Appends under the server's 4 MiB body limit.
    for (let at = 0; at < want.length; at += MB) await handle.append(want.subarray(at, Math.min(at + MB, want.length)))
    const res = await stream({ url, offset: "-1", live: false })
    const got = await res.body()
    expect(got.length).toBe(want.length)
    expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0)
    expect(res.upToDate).toBe(true)

    const textUrl = `${base}/v1/stream/interop/large-text-${unique()}`
    const text = await DurableStream.create({ url: textUrl, contentType: "text/plain" })
    const line = "0123456789abcdefghijklmnopqrstuvwxyz\n".repeat(1000)
    for (let i = 0; i < 140; i++) await text.append(line)
    const whole = await (await stream({ url: textUrl, offset: "-1", live: false })).text()
    expect(whole.length).toBe(140 * line.length)
    expect(whole).toBe(line.repeat(140))
  })
})
