import { TetherError } from '@tether/client';
import { describe, expect, it } from 'vitest';
import { blocks, duration, errorText, firstUserText, optionsFromQuery, plainTitle, requestPrompt, runMetadata, spans, threadBadge, threadStatusLabel, titleFrom, DEFAULT_OPTIONS, UNREACHABLE } from '../../src/format.js';

// What the page shows of a text, as characters: blocks and spans keep every
// character of the text except the markers, so the DOM's text of a plain
// answer is exactly the answer (the page tests compare it with final-answer).
const shown = (text: string) =>
  blocks(text)
    .map((b) => (b.kind === 'code' ? b.text : spans(b.text).map((s) => s.text).join('')))
    .join('');

describe('blocks', () => {
  it('keeps plain text whole', () => {
    const t = 'Here is what I found about “x”.\nSecond line <b>not html</b>.';
    expect(blocks(t)).toEqual([{ kind: 'prose', text: t }]);
    expect(shown(t)).toBe(t);
  });

  it('splits fenced code, with its language', () => {
    expect(blocks('before\n```js\nlet a = 1;\n```\nafter')).toEqual([
      { kind: 'prose', text: 'before\n' },
      { kind: 'code', lang: 'js', text: 'let a = 1;' },
      { kind: 'prose', text: 'after' },
    ]);
  });

  it('runs an unclosed fence (still streaming) to the end', () => {
    expect(blocks('```\npartial')).toEqual([{ kind: 'code', lang: '', text: 'partial' }]);
    expect(blocks('a\n```py')).toEqual([
      { kind: 'prose', text: 'a\n' },
      { kind: 'code', lang: 'py', text: '' },
    ]);
  });
});

describe('spans', () => {
  it('finds code and strong spans', () => {
    expect(spans('use `fetch` and **never** poll')).toEqual([
      { kind: 'text', text: 'use ' },
      { kind: 'code', text: 'fetch' },
      { kind: 'text', text: ' and ' },
      { kind: 'strong', text: 'never' },
      { kind: 'text', text: ' poll' },
    ]);
  });

  it('leaves unclosed markers as text (a delta may split them)', () => {
    expect(spans('a `b and **c')).toEqual([{ kind: 'text', text: 'a `b and **c' }]);
  });
});

describe('options', () => {
  it('reads the query', () => {
    expect(optionsFromQuery('?tokens=200&delay_ms=40&ask=1&tool=0&agent=demo&approve=yes')).toEqual({
      ...DEFAULT_OPTIONS,
      agent: 'demo',
      tokens: 200,
      delayMs: 40,
      ask: true,
      approve: true,
      tool: false,
    });
    expect(optionsFromQuery('')).toEqual(DEFAULT_OPTIONS);
    expect(optionsFromQuery('?tokens=-3&delay_ms=x')).toEqual(DEFAULT_OPTIONS);
  });

  it('sends only what differs from the demo defaults', () => {
    expect(runMetadata(DEFAULT_OPTIONS)).toBeUndefined();
    expect(runMetadata({ ...DEFAULT_OPTIONS, tokens: 0, ask: true, reasoning: false })).toEqual({ demo: { tokens: 0, reasoning: false, ask: true } });
    expect(runMetadata({ ...DEFAULT_OPTIONS, approve: true })).toEqual({ demo: { approve: true } });
  });
});

describe('labels', () => {
  it('names thread statuses for people', () => {
    expect(threadStatusLabel('busy')).toBe('running');
    expect(threadStatusLabel('waiting')).toBe('needs input');
  });

  it('tells an aborted or stopped last run from an error or an idle thread', () => {
    expect(threadBadge('error', 'aborted')).toEqual({ label: 'aborted', status: 'aborted' });
    expect(threadBadge('error', 'error')).toEqual({ label: 'error', status: 'error' });
    expect(threadBadge('error')).toEqual({ label: 'error', status: 'error' });
    expect(threadBadge('idle', 'cancelled')).toEqual({ label: 'stopped', status: 'cancelled' });
    expect(threadBadge('idle', 'done')).toEqual({ label: 'idle', status: 'idle' });
    expect(threadBadge('busy', 'aborted')).toEqual({ label: 'running', status: 'busy' });
  });

  it('shows what a waiting run asks', () => {
    expect(requestPrompt({ prompt: 'Which detail?' })).toBe('Which detail?');
    expect(requestPrompt('plain')).toBe('plain');
    expect(requestPrompt(undefined)).toMatch(/waiting/);
    expect(requestPrompt({ choices: [1, 2] })).toContain('"choices"');
  });

  it('formats durations and titles', () => {
    expect(duration('2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.250Z')).toBe('1.3 s');
    expect(duration('2026-01-01T00:00:00.000Z', '2026-01-01T00:02:05.000Z')).toBe('2 min 5 s');
    expect(duration(null, '2026-01-01T00:00:00.000Z')).toBe('');
    expect(titleFrom('  a\n b  ')).toBe('a b');
    expect(titleFrom('x'.repeat(80))).toHaveLength(58);
  });

  it('makes titles plain text', () => {
    expect(plainTitle('**Why** is `fsync` _slow_?')).toBe('Why is fsync slow?');
    expect(plainTitle('# Heading\n- item one\n> quoted [link](https://x.y)')).toBe('Heading item one quoted link');
    expect(plainTitle('```go\nfmt.Println()\n```')).toBe('fmt.Println()');
    expect(plainTitle('snake_case_name and 2*3*4 stay')).toBe('snake_case_name and 2*3*4 stay');
    expect(titleFrom('**Bold** question')).toBe('Bold question');
    expect(firstUserText([{ role: 'assistant', parts: [{ type: 'text', text: 'no' }] }, { role: 'user', parts: [{ type: 'text', text: 'Hi ' }, { type: 'text', text: 'there' }] }])).toBe('Hi there');
    expect(firstUserText([{ role: 'user', parts: [] }])).toBeUndefined();
  });

  it('makes a title of a huge text from its head (hostile brackets do not stall the page)', () => {
    // The sidebar and the header title every thread on each render: a
    // title's cost must not grow with the text (a message is up to 1 MiB,
    // a metadata title 64 KiB). Unbounded, these took minutes.
    expect(plainTitle('['.repeat(1_000_000))).toBe(`${'['.repeat(57)}…`);
    expect(plainTitle('[]('.repeat(300_000))).toBe(`${'[]('.repeat(19)}…`);
    expect(titleFrom(`Look at [this](https://x.y/${'a'.repeat(100)}) ${'word '.repeat(200_000)}`)).toBe(`Look at this ${'word '.repeat(8)}word…`);
  });
});

describe('errorText', () => {
  it("says the server could not be reached for no answer, and the server's message otherwise", () => {
    expect(errorText(new TetherError('network', 'Failed to fetch'))).toBe(UNREACHABLE);
    expect(errorText(new TetherError('unavailable', 'the store cannot be reached', 503))).toBe('the store cannot be reached');
    expect(errorText(new Error('no thread is open'))).toBe('no thread is open');
    expect(errorText('odd')).toBe('odd');
  });

  it('says what a refusal the person can act on is, and what to do', () => {
    expect(errorText(new TetherError('too_large', 'request body is larger than 4096 bytes', 413))).toBe('The message is too long to send: request body is larger than 4096 bytes.');
    expect(errorText(new TetherError('rate_limited', 'too many runs started: retry in 1s', 429))).toBe('Too many requests: too many runs started: retry in 1s. Wait a moment, then send again.');
    expect(errorText(new TetherError('quota_exceeded', 'the monthly runs are used up.', 429))).toBe('Quota used up: the monthly runs are used up.');
  });

  it("says how long to wait when the answer's Retry-After says", () => {
    const limited = (ms: number) => new TetherError('rate_limited', 'too many runs started: retry in 12s', 429, { retryAfterMs: ms });
    expect(errorText(limited(12_000))).toBe('Too many requests: wait 12 s, then send again.');
    expect(errorText(limited(1_000))).toBe('Too many requests: wait 1 s, then send again.');
    expect(errorText(limited(0))).toBe('Too many requests: send again now.');
    expect(errorText(limited(150_000))).toBe('Too many requests: wait 2 min 30 s, then send again.');
    expect(errorText(limited(120_000))).toBe('Too many requests: wait 2 min, then send again.');
    const busy = new TetherError('unavailable', 'too many large bodies at once', 503, { retryAfterMs: 3_000 });
    expect(errorText(busy)).toBe('The server is busy (too many large bodies at once): wait 3 s, then send again.');
  });
});
