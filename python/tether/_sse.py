"""An incremental Server-Sent Events parser (the WHATWG event stream format).

It is fed bytes in any chunking and returns whole frames: line ends may be
LF, CR or CRLF (also split across chunks), a leading BOM is dropped,
comments (``:ok``) are skipped, and a frame is dispatched at a blank line.
A frame cut off by the end of the stream is never returned: it may be
half of an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

MAX_FRAME = 64 << 20
"""The largest frame read; a bigger one is an error (the server's events are at most 1 MiB)."""


@dataclass
class Frame:
    """One SSE frame: its ``event`` name (``message`` if none), ``data`` and ``id``."""

    event: str
    data: str
    id: Optional[str]
    has_data: bool


class FrameTooLarge(ValueError):
    pass


class SSEParser:
    def __init__(self) -> None:
        # The bytes after the last whole line, and how many of them are
        # known to hold no line end: a line longer than a chunk (a large
        # snapshot) is scanned once in all, not again at every chunk.
        self._buf = bytearray()
        self._scanned = 0
        self._started = False
        self._cr = False  # the last chunk ended in CR: a following LF belongs to it
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self._id: Optional[str] = None
        self._size = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        """Adds bytes and returns the frames they complete."""
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = False
        buf = self._buf
        buf += chunk
        if not self._started:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                return []
            if buf.startswith(b"\xef\xbb\xbf"):
                del buf[:3]
            self._started = True
        out: list[Frame] = []
        start = 0
        n = len(buf)
        scan = self._scanned
        while True:
            i_lf = buf.find(b"\n", scan)
            i_cr = buf.find(b"\r", scan, i_lf if i_lf >= 0 else n)
            if i_lf < 0 and i_cr < 0:
                break
            if i_cr < 0:
                end, nxt = i_lf, i_lf + 1
            else:
                end = i_cr
                if i_cr + 1 < n:
                    nxt = i_cr + 2 if buf[i_cr + 1] == 0x0A else i_cr + 1
                else:
                    nxt = i_cr + 1
                    self._cr = True
            line = bytes(buf[start:end])
            start = scan = nxt
            f = self._line(line)
            if f is not None:
                out.append(f)
        del buf[:start]
        self._scanned = len(buf)
        if len(buf) + self._size > MAX_FRAME:
            raise FrameTooLarge("an event stream frame is over 64 MiB")
        return out

    def _line(self, raw: bytes) -> Optional[Frame]:
        if not raw:
            f = None
            if self._has_data or self._event:
                f = Frame(self._event or "message", "\n".join(self._data), self._id_for_frame, self._has_data)
            self._event, self._data, self._has_data, self._size = "", [], False, 0
            self._frame_id = None
            return f
        self._size += len(raw)
        if self._size > MAX_FRAME:
            raise FrameTooLarge("an event stream frame is over 64 MiB")
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id":
            if "\x00" not in value:
                self._id = value
                self._frame_id = value
        return None

    _frame_id: Optional[str] = None

    @property
    def _id_for_frame(self) -> Optional[str]:
        # Tether puts an id on every event and none on control frames: a
        # frame's id is the one set within it, not the stream's last one.
        return self._frame_id
