"""Issue 8, item 12: every length read from a worker is checked before anything is allocated."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from sandbox._protocol import Bounds, FrameBuffer, FrameError, encode, read_frame

BOUNDS = Bounds(header=1024, blobs=2, blob_bytes=100, total_bytes=150)


def _pipe_with(data: bytes) -> int:
    r, w = os.pipe()
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    return r


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"\xff\xff\xff\xff" + b"x" * 16, "exceeds the 1024-byte limit"),  # a 4 GiB header
        (encode({"pad": "x" * 2000}), "exceeds the 1024-byte limit"),
        (encode({}, [b"a", b"b", b"c"]), "more than 2 blobs"),
        (encode({}, [b"a" * 101]), "blob size outside"),
        (encode({}, [b"a" * 80, b"b" * 80]), "total more than 150"),
        (struct.pack(">I", 5) + b"nope!", "not JSON"),
        (struct.pack(">I", 2) + b"[]", "not a JSON object"),
    ],
)
def test_out_of_bounds_frames_are_refused_by_both_readers(frame: bytes, why: str) -> None:
    fd = _pipe_with(frame)
    try:
        with pytest.raises(FrameError, match=why):
            read_frame(fd, BOUNDS)
    finally:
        os.close(fd)
    buf = FrameBuffer(BOUNDS)
    with pytest.raises(FrameError, match=why):
        for i in range(len(frame)):  # byte by byte, as non-blocking reads may deliver it
            buf.feed(frame[i : i + 1])


def test_bytes_after_a_frame_are_refused() -> None:
    buf = FrameBuffer(BOUNDS)
    with pytest.raises(FrameError, match="after the end"):
        buf.feed(encode({"a": 1}) + b"stray")


def test_a_frame_within_bounds_round_trips() -> None:
    frame = encode({"status": "ok"}, [b"x" * 100, b"y" * 50])
    fd = _pipe_with(frame)
    try:
        header, blobs = read_frame(fd, BOUNDS)
    finally:
        os.close(fd)
    assert header["status"] == "ok" and blobs == [b"x" * 100, b"y" * 50]
    buf = FrameBuffer(BOUNDS)
    assert buf.feed(frame[:7]) is False and buf.feed(frame[7:]) is True
    assert buf.frame() == (header, blobs)
