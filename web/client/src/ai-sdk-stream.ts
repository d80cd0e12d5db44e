// The wire of Tether's UI message streams: `data: <chunk JSON>` frames, the
// last frame of each event's chunks preceded by `id: <offset>`, and `:ping`
// comments.

/** One frame of a UI message stream. */
export interface UIFrame {
  /** The offset this frame ends (the last frame of an event's chunks), else `undefined`. */
  id: string | undefined;
  /** The chunk, as sent. */
  chunk: { type: string; [key: string]: unknown };
  /** The frame's size in bytes on the wire. */
  size: number;
  /**
   * The frame's `event` field, if it has one: a control frame, not a chunk
   * (`reconnect`, whose `chunk` is its data, e.g. `{"reason":"token_expired"}`).
   */
  event?: string;
}

/**
 * Parses a UI message stream into its frames. Comments are skipped; a
 * frame whose data is not JSON throws. `onBytes` is told of each piece of
 * the body as it arrives (to count it and to see that the stream lives).
 * Aborting `signal` ends the parse with an error, as a drop does.
 */
export async function* parseUIStream(
  body: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
  onBytes?: (n: number) => void,
): AsyncGenerator<UIFrame> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  // The unfinished block, as the pieces of text it came in (line endings
  // made LF): only a read's own text is searched for the blank line and a
  // block is joined once, when it ends, so a frame of n characters in
  // reads of k costs O(n), not the O(n²/k) of a buffer searched and
  // rewritten at every read.
  let pieces: string[] = [];
  let lastLF = false; // the last piece ends with LF: a LF at the start of the next ends the block
  let held = ''; // a CR at the end of a read: maybe the first half of a CRLF
  const onAbort = () => {
    reader.cancel(new DOMException('idle', 'AbortError')).catch(() => {});
  };
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (signal?.aborted) throw new DOMException('aborted', 'AbortError');
      if (done) {
        finished = true;
        break;
      }
      onBytes?.(value.byteLength);
      let text = held + dec.decode(value, { stream: true });
      // A CR at the end may be the first half of a CRLF that the next
      // read completes: it waits.
      held = text.endsWith('\r') ? '\r' : '';
      text = text.slice(0, text.length - held.length).replace(/\r\n?/g, '\n');
      let from = 0;
      if (lastLF && text.startsWith('\n')) {
        // The blank line straddles two reads: the block is what was held, less its LF.
        const block = pieces.join('');
        pieces = [];
        lastLF = false;
        from = 1;
        const frame = parseBlock(block.slice(0, -1));
        if (frame) yield frame;
      }
      let end: number;
      while ((end = text.indexOf('\n\n', from)) !== -1) {
        const block = pieces.length > 0 ? pieces.join('') + text.slice(from, end) : text.slice(from, end);
        pieces = [];
        lastLF = false;
        from = end + 2;
        const frame = parseBlock(block);
        if (frame) yield frame;
      }
      if (from < text.length) {
        pieces.push(text.slice(from));
        lastLF = text.endsWith('\n');
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A reader that stops early (the terminal chunk came) lets the
    // connection go.
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  if ((pieces.join('') + held).trim() !== '') throw new TypeError('network error: the stream ended in the middle of a frame');
}

function parseBlock(block: string): UIFrame | undefined {
  let id: string | undefined;
  let data: string | undefined;
  let event: string | undefined;
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
  }
  if (data === undefined || data === '[DONE]') return undefined;
  const chunk = JSON.parse(data) as UIFrame['chunk'];
  return { id: id === '' ? undefined : id, chunk, size: new TextEncoder().encode(block).length + 2, ...(event !== undefined ? { event } : {}) };
}
