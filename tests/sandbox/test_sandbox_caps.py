"""Issue 8, item 11: the evaluator caps every field again, as if the worker itself were compromised."""

from __future__ import annotations

import io
from dataclasses import asdict

from PIL import Image

from sandbox import SandboxLimits
from sandbox._caps import cap_reply, image_pixels

LIMITS = asdict(SandboxLimits(output_chars=100, max_output_images=2, max_output_bytes=10_000, max_image_pixels=2_500))


def _png(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (w, h)).save(buf, "PNG")
    return buf.getvalue()


def test_every_field_of_a_hostile_reply_is_bounded() -> None:
    reply = {
        "status": "pwned",
        "error": "E" * 5_000_000,
        "stdout": "o" * 1_000_000,
        "stderr": ["not", "a", "string"],
        "stdout_chars": -5,
        "outputs": [{"name": "n" * 10_000, "path": "p" * 10_000}, "junk", {"name": 7}],
        "extra": "x" * 1_000_000,
    }
    clean, blobs = cap_reply(reply, [_png(10, 10), _png(10, 10), _png(10, 10)], LIMITS, image_pixels)
    assert clean["status"] == "crashed"
    assert len(clean["error"]) < 2_100
    assert len(clean["stdout"]) < 400 and "truncated" in clean["stdout"]
    assert isinstance(clean["stderr"], str) and len(clean["stderr"]) < 400
    assert clean["stdout_chars"] == 0
    assert "extra" not in clean
    assert len(blobs) == 2 and len(clean["outputs"]) == 2
    assert all(len(o["name"]) <= 255 and len(o["path"]) <= 1024 for o in clean["outputs"])


def test_images_over_pixels_bytes_or_unreadable_are_dropped_with_a_note() -> None:
    reply = {"status": "ok", "error": None, "outputs": [{"name": "big.png"}, {"name": "bad.png"}, {"name": "ok.png"}]}
    clean, blobs = cap_reply(reply, [_png(100, 100), b"\x89PNG garbage", _png(50, 50)], LIMITS, image_pixels)
    assert [o["name"] for o in clean["outputs"]] == ["ok.png"] and len(blobs) == 1
    assert "10000 pixels exceeds the 2500-pixel limit" in clean["stderr"]
    assert "not a readable image" in clean["stderr"]
    heavy = {"status": "ok", "error": None, "outputs": [{"name": "a"}, {"name": "b"}]}
    _, kept = cap_reply(heavy, [b"x" * 6_000, b"y" * 6_000], {**LIMITS, "file_bytes": 8_000})
    assert len(kept) == 1  # the second would pass the 10 kB total
