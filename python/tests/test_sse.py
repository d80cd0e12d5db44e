"""The SSE parser, fed in uneven chunks (as a network delivers them)."""

from tether._sse import SSEParser

STREAM = (
    "\ufeff:ok\r\n\r\nevent: connected\r\ndata: {\"offset\":\"-1\"}\r\n\r\n"
    "id: 1_1\nevent: text.delta\ndata: {\"delta\":\"a\"}\n\n"
    "id: 1_2\revent: text.delta\rdata: line1\rdata: line2\r\r"
    "event: ping\ndata: {}\n\n"
    "id: 1_3\nevent: text.delta\ndata: cut"
).encode()


def frames(chunks):
    p = SSEParser()
    out = []
    for c in chunks:
        out += [(f.event, f.data, f.id) for f in p.feed(c)]
    return out


def test_every_chunking_gives_the_same_frames():
    want = [
        ("connected", '{"offset":"-1"}', None),
        ("text.delta", '{"delta":"a"}', "1_1"),
        ("text.delta", "line1\nline2", "1_2"),
        ("ping", "{}", None),
    ]
    assert frames([STREAM]) == want
    for size in (1, 2, 3, 5, 7, 13):
        chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        assert frames(chunks) == want, size


def test_a_frame_cut_by_the_end_of_the_stream_is_not_returned():
    assert frames([b"id: 9\nevent: text.delta\ndata: half"]) == []


def test_crlf_split_between_chunks_is_one_line_end():
    assert frames([b"event: a\r", b"\ndata: x\r", b"\n\r", b"\n"]) == [("a", "x", None)]
