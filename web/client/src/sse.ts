/** One frame of a Server-Sent Events stream. */
export interface SSEFrame {
  /** The event type; `"message"` when the frame named none. */
  event: string;
  /** The frame's data lines joined with "\n" ("" when it had none). */
  data: string;
  /**
   * The frame's own `id` field, if it had one. Unlike the browser's
   * `lastEventId` it does not carry over from earlier frames.
   */
  id: string | undefined;
  /** The `retry` field in milliseconds, if valid. */
  retry: number | undefined;
  /** The frame had fields but no data line (browsers do not dispatch it). */
  noData: boolean;
}

/** Thrown (by {@link SSEParser.feed}) when a line or a frame's data passes the limit. */
export class SSEFrameTooLargeError extends Error {
  /** Makes the error for a limit in characters. */
  constructor(limit: number) {
    super(`event stream frame is larger than ${limit} characters`);
    this.name = 'SSEFrameTooLargeError';
  }
}

/** Default limit of one line and of one frame's data: 64 Mi characters (a snapshot holds a whole thread). */
export const DEFAULT_MAX_FRAME = 64 * 1024 * 1024;

/**
 * A push parser of Server-Sent Events, per the WHATWG rules: fields `id`,
 * `event`, `data`, `retry`; comments; data lines joined with "\n"; CR, LF and
 * CRLF line endings, also when a CRLF is split between two chunks; a leading
 * BOM is skipped; a last frame without its blank line is dropped. Feed it
 * text in chunks of any size; it calls `onFrame` for each complete frame.
 */
export class SSEParser {
  // The unfinished line, as the pieces of text it came in: only a chunk's
  // own text is searched for line endings and a line is joined once, when
  // it ends, so a frame of n characters in chunks of k costs O(n), not the
  // O(n²/k) of a buffer searched (and, in V8, flattened) at every chunk.
  private pending: string[] = [];
  private pendingLen = 0;
  private skipLF = false; // the last line ended with CR: a LF right after belongs to it
  private started = false;
  private event = '';
  private data: string[] = [];
  private dataLen = 0;
  private id: string | undefined;
  private retry: number | undefined;
  private fields = false;

  /**
   * Makes a parser. `onFrame` is called synchronously from {@link feed};
   * `maxFrame` bounds a line and a frame's data, in characters.
   */
  constructor(
    private readonly onFrame: (frame: SSEFrame) => void,
    private readonly maxFrame = DEFAULT_MAX_FRAME,
  ) {}

  /** Parses a chunk of text. Throws {@link SSEFrameTooLargeError} past the limit. */
  feed(chunk: string): void {
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    if (this.skipLF && chunk.length > 0) {
      this.skipLF = false;
      if (chunk.charCodeAt(0) === 10) chunk = chunk.slice(1);
    }
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      let line = chunk.slice(start, i);
      if (this.pending.length > 0) {
        this.pending.push(line);
        line = this.pending.join('');
        this.pending = [];
        this.pendingLen = 0;
      }
      this.line(line);
      if (c === 13) {
        if (i + 1 < chunk.length) {
          if (chunk.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLF = true;
        }
      }
      start = i + 1;
    }
    if (start < chunk.length) {
      this.pending.push(start > 0 ? chunk.slice(start) : chunk);
      this.pendingLen += chunk.length - start;
    }
    if (this.pendingLen > this.maxFrame) throw new SSEFrameTooLargeError(this.maxFrame);
  }

  /** Ends the stream: an unfinished frame is dropped, and the parser is reset. */
  end(): void {
    this.pending = [];
    this.pendingLen = 0;
    this.skipLF = false;
    this.started = false;
    this.clear();
  }

  private clear(): void {
    this.event = '';
    this.data = [];
    this.dataLen = 0;
    this.id = undefined;
    this.retry = undefined;
    this.fields = false;
  }

  private line(line: string): void {
    if (line.length === 0) {
      if (this.fields) {
        const frame: SSEFrame = {
          event: this.event || 'message',
          data: this.data.join('\n'),
          id: this.id,
          retry: this.retry,
          noData: this.data.length === 0,
        };
        this.clear();
        this.onFrame(frame);
      }
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return; // a comment
    let name = line;
    let value = '';
    const colon = line.indexOf(':');
    if (colon >= 0) {
      name = line.slice(0, colon);
      value = line.slice(colon + (line.charCodeAt(colon + 1) === 32 ? 2 : 1));
    }
    switch (name) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.dataLen += value.length + 1;
        if (this.dataLen > this.maxFrame) throw new SSEFrameTooLargeError(this.maxFrame);
        this.data.push(value);
        break;
      case 'id':
        if (value.indexOf('\0') >= 0) return; // ignored, per the spec
        this.id = value;
        break;
      case 'retry':
        if (!/^[0-9]+$/.test(value)) return; // ignored, per the spec
        this.retry = Number(value);
        break;
      default:
        return; // unknown fields are ignored and do not make a frame
    }
    this.fields = true;
  }
}

/**
 * Reads a byte stream as SSE frames: decodes UTF-8 across chunk boundaries
 * and yields each frame as soon as its blank line arrives. The iteration
 * ends at the end of the stream; an unfinished last frame is dropped.
 * Breaking out of the loop cancels the stream's reader.
 */
export async function* readSSE(
  body: ReadableStream<Uint8Array>,
  maxFrame = DEFAULT_MAX_FRAME,
): AsyncGenerator<SSEFrame, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const pending: SSEFrame[] = [];
  const parser = new SSEParser((f) => pending.push(f), maxFrame);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        parser.feed(decoder.decode());
        while (pending.length) yield pending.shift()!;
        return;
      }
      parser.feed(decoder.decode(value, { stream: true }));
      while (pending.length) yield pending.shift()!;
    }
  } finally {
    parser.end();
    reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
