import { describe, expect, it } from 'vitest';
import { SSEFrameTooLargeError, SSEParser, readSSE, type SSEFrame } from '../src/sse.js';
import { Pipe } from './helpers/fake.js';

// A fixture with every feature: comments, CR, LF and CRLF endings, a
// multi-line data field, no space after the colon, id and retry, a frame
// with no data, an unknown field, a field with no colon, non-ASCII text, and
// an unfinished last frame that must be dropped.
const FIXTURE =
  '\uFEFF:ok\n\n' +
  'event: connected\r\ndata: {"offset":"-1"}\r\n\r\n' +
  'id: 0000000001_0000000000000001\rEVENT: ignored\revent: text.delta\rdata: {"delta":"héllo 🌍"}\r\r' +
  'data:first\ndata: second\ndata\n\n' +
  'retry: 250\nid: x\nevent: reconnect\n\n' +
  'retry: nope\nfoo: bar\n\n' +
  ': a comment\nid: a\0b\nevent: ping\ndata: {}\n\n' +
  'event: cut\ndata: never dispatched';

const EXPECTED: SSEFrame[] = [
  { event: 'connected', data: '{"offset":"-1"}', id: undefined, retry: undefined, noData: false },
  { event: 'text.delta', data: '{"delta":"héllo 🌍"}', id: '0000000001_0000000000000001', retry: undefined, noData: false },
  { event: 'message', data: 'first\nsecond\n', id: undefined, retry: undefined, noData: false },
  { event: 'reconnect', data: '', id: 'x', retry: 250, noData: true },
  { event: 'ping', data: '{}', id: undefined, retry: undefined, noData: false },
];

function parse(chunks: string[]): SSEFrame[] {
  const out: SSEFrame[] = [];
  const p = new SSEParser((f) => out.push(f));
  for (const c of chunks) p.feed(c);
  p.end();
  return out;
}

// A small deterministic generator, so that failures reproduce.
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function unevenChunks(text: string, seed: number, max = 9): string[] {
  const r = rng(seed);
  const out: string[] = [];
  for (let i = 0; i < text.length; ) {
    const n = 1 + Math.floor(r() * max);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

describe('SSEParser', () => {
  it('parses a fixture in one piece', () => {
    expect(parse([FIXTURE])).toEqual(EXPECTED);
  });

  it('gives the same frames for every split into two chunks', () => {
    for (let i = 0; i <= FIXTURE.length; i++) {
      expect(parse([FIXTURE.slice(0, i), FIXTURE.slice(i)]), `split at ${i}`).toEqual(EXPECTED);
    }
  });

  it('gives the same frames for uneven chunks, one character at a time too', () => {
    for (let seed = 1; seed <= 200; seed++) expect(parse(unevenChunks(FIXTURE, seed))).toEqual(EXPECTED);
    expect(parse(FIXTURE.split(''))).toEqual(EXPECTED);
  });

  it('counts a CRLF split between chunks as one line ending', () => {
    expect(parse(['data: a\r', '\n\r', '\ndata: b\r\n\r\n'])).toEqual([
      { event: 'message', data: 'a', id: undefined, retry: undefined, noData: false },
      { event: 'message', data: 'b', id: undefined, retry: undefined, noData: false },
    ]);
  });

  it('refuses a frame larger than its limit', () => {
    const p = new SSEParser(() => {}, 16);
    expect(() => p.feed('data: 0123456789\ndata: 0123456789\n')).toThrow(SSEFrameTooLargeError);
    const q = new SSEParser(() => {}, 16);
    expect(() => q.feed('data: 01234567890123456789')).toThrow(SSEFrameTooLargeError);
  });
});

describe('readSSE', () => {
  it('decodes UTF-8 split inside characters and yields frames as they complete', async () => {
    const pipe = new Pipe(() => {});
    const got: SSEFrame[] = [];
    const done = (async () => {
      for await (const f of readSSE(pipe.stream)) got.push(f);
    })();
    pipe.pushChunked(FIXTURE, [1, 2, 3, 5, 7, 11]); // byte sizes: splits 🌍 and é
    pipe.end();
    await done;
    expect(got).toEqual(EXPECTED);
  });

  it('cancels the stream when the loop breaks', async () => {
    const pipe = new Pipe(() => {});
    pipe.push('data: 1\n\ndata: 2\n\n');
    for await (const f of readSSE(pipe.stream)) {
      expect(f.data).toBe('1');
      break;
    }
    expect(pipe.cancelled).toBe(true);
  });
});
