"""Encoding profiles, budget downsizing, and the async encoder's cache."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fasteval.images import ImageEncoder, ImageError, encode, encode_image
from fasteval.runfolder.blobs import BlobStore


def _save(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _noise(w: int, h: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def _open(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def test_jpeg85_converts_to_rgb_jpeg() -> None:
    data = _save(Image.new("RGBA", (60, 40), (10, 120, 240, 0)), "PNG")
    mime, out = encode_image(data, "jpeg85")
    assert mime == "image/jpeg"
    img = _open(out)
    assert img.mode == "RGB" and img.size == (60, 40)
    # Alpha is dropped like PIL convert("RGB"), not flattened.
    assert np.abs(np.asarray(img)[20, 30].astype(int) - (10, 120, 240)).max() <= 6


def test_jpeg85_is_close_to_pil_quality_85() -> None:
    src = _noise(128, 128)
    ours = len(encode_image(_save(src, "PNG"), "jpeg85")[1])
    pil85 = len(_save(src, "JPEG", quality=85))
    assert 0.8 < ours / pil85 < 1.25


def test_original_returns_the_same_bytes() -> None:
    data = _save(_noise(50, 30), "WEBP")
    assert encode_image(data, "original") == ("image/webp", data)
    jpg = _save(_noise(50, 30), "JPEG")
    assert encode_image(jpg, "original") == ("image/jpeg", jpg)


def test_png_smart_resizes_to_factor_32_and_flattens_on_white() -> None:
    data = _save(Image.new("RGBA", (1000, 800), (0, 0, 0, 0)), "PNG")
    enc = encode(data, "png_smart")
    assert enc.mime == "image/png" and (enc.width, enc.height) == (992, 800)
    img = _open(enc.data)
    assert img.size == (992, 800) and img.mode == "RGB"
    assert img.getpixel((5, 5)) == (255, 255, 255)


def test_png_smart_upscales_small_images_to_min_pixels() -> None:
    enc = encode(_save(Image.new("RGB", (50, 100), (9, 9, 9)), "PNG"), "png_smart")
    assert (enc.width, enc.height) == (192, 384)


def test_pixel_budget_downsizes_instead_of_failing() -> None:
    data = _save(_noise(400, 300), "PNG")
    for profile in ("jpeg85", "original", "png_smart"):
        enc = encode(data, profile, max_pixels=20_000)
        assert enc.width * enc.height <= 20_000, profile
        assert _open(enc.data).size == (enc.width, enc.height)
        if profile != "png_smart":  # factor-32 rounding distorts tiny sizes
            assert abs(enc.width / enc.height - 4 / 3) < 0.05


@pytest.mark.parametrize("profile", ["jpeg85", "original", "png_smart"])
def test_byte_budget_downsizes_instead_of_failing(profile: str) -> None:
    data = _save(_noise(600, 400), "JPEG", quality=95)
    enc = encode(data, profile, max_bytes=30_000)
    assert len(enc.data) <= 30_000
    assert enc.width < 600


def test_original_over_budget_keeps_jpeg_family() -> None:
    data = _save(_noise(600, 400), "JPEG", quality=95)
    mime, out = encode_image(data, "original", max_bytes=len(data) // 3)
    assert mime == "image/jpeg" and len(out) <= len(data) // 3


def test_impossible_budget_is_an_image_error() -> None:
    with pytest.raises(ImageError, match="cannot fit"):
        encode(_save(_noise(200, 200), "PNG"), "png_smart", max_bytes=50)


def test_unknown_profile_and_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown image profile"):
        encode_image(b"x", "webp99")
    with pytest.raises(ImageError):
        encode_image(b"", "jpeg85")


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


async def test_encoder_caches_by_ref_profile_and_budget(blobs: BlobStore) -> None:
    ref = blobs.put(_save(_noise(120, 80), "PNG"))
    enc = ImageEncoder(blobs)
    try:
        url = await enc.data_url(ref, "jpeg85")
        assert url.startswith("data:image/jpeg;base64,")
        assert _open(base64.b64decode(url.split(",", 1)[1])).size == (120, 80)
        assert await enc.data_url(ref, "jpeg85") == url
        assert (enc.stats.hits, enc.stats.misses) == (1, 1)
        await enc.encode(ref, "png_smart")
        await enc.encode(ref, "jpeg85", max_pixels=1000)
        assert enc.stats.misses == 3 and len(enc) == 3
    finally:
        enc.close()


async def test_concurrent_requests_share_one_encoding(blobs: BlobStore) -> None:
    ref = blobs.put(_save(_noise(300, 200), "PNG"))
    enc = ImageEncoder(blobs)
    try:
        results = await asyncio.gather(*(enc.encode(ref, "png_smart") for _ in range(8)))
        assert enc.stats.misses == 1 and enc.stats.hits == 7
        assert len({r.data for r in results}) == 1
    finally:
        enc.close()


async def test_cache_is_bounded_by_total_bytes(blobs: BlobStore) -> None:
    refs = [blobs.put(_save(_noise(64, 64, seed=i), "PNG")) for i in range(6)]
    enc = ImageEncoder(blobs, max_cache_bytes=30_000)
    try:
        for ref in refs:
            await enc.encode(ref, "original")
        assert enc.cache_bytes <= 30_000
        assert enc.stats.evictions > 0
        await enc.encode(refs[0], "original")  # evicted first, so encoded again
        assert enc.stats.misses == 7
    finally:
        enc.close()


async def test_encoder_errors_propagate_and_are_not_cached(blobs: BlobStore) -> None:
    enc = ImageEncoder(blobs)
    try:
        with pytest.raises(KeyError):
            await enc.encode("0" * 64, "jpeg85")
        bad = blobs.put(b"garbage bytes, not an image")
        with pytest.raises(ImageError):
            await enc.data_url(bad, "jpeg85")
        assert len(enc) == 0
    finally:
        enc.close()
