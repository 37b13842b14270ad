"""Decoding every format benchmarks ship, and rejecting bad input with ImageError."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import pyvips
from PIL import Image

from fasteval.images import ImageError, ImageLimits, decode, probe, thumbnail, to_numpy, verify


def _pil(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(to_numpy(decode(data)))


RED = (200, 30, 40)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF", "GIF"])
def test_decodes_common_formats_to_8bit_rgb(fmt: str) -> None:
    data = _pil(Image.new("RGB", (40, 30), RED), fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    img = decode(data)
    assert (img.width, img.height, img.bands, img.format) == (40, 30, 3, "uchar")
    px = _pixels(data)[15, 20].astype(int)
    assert np.abs(px - RED).max() <= 6


def test_mpo_gives_the_first_image() -> None:
    first, second = Image.new("RGB", (32, 24), (255, 0, 0)), Image.new("RGB", (32, 24), (0, 0, 255))
    data = _pil(first, "MPO", save_all=True, append_images=[second])
    assert probe(data).mime == "image/jpeg"
    assert _pixels(data)[12, 16, 0] > 200


def test_gif_gives_the_first_frame() -> None:
    frames = [Image.new("RGB", (20, 20), c) for c in [(255, 0, 0), (0, 255, 0)]]
    data = _pil(frames[0], "GIF", save_all=True, append_images=frames[1:])
    px = _pixels(data)[5, 5]
    assert px[0] > 200 and px[1] < 50


def test_exif_orientation_is_applied() -> None:
    arr = np.zeros((20, 40, 3), np.uint8)
    arr[:, :20] = 255  # left half white in stored pixels
    img = Image.fromarray(arr)
    exif = img.getexif()
    exif[0x0112] = 6  # display = stored rotated 90 degrees clockwise
    data = _pil(img, "JPEG", exif=exif, quality=95)
    info = probe(data)
    assert (info.width, info.height, info.orientation) == (20, 40, 6)
    px = _pixels(data)
    assert px.shape[:2] == (40, 20)
    assert px[5, 10].mean() > 200 and px[35, 10].mean() < 50  # white half now on top


def test_cmyk_jpeg_becomes_srgb() -> None:
    data = _pil(Image.new("CMYK", (16, 16), (0, 255, 255, 0)), "JPEG", quality=95)
    assert probe(data).interpretation == "cmyk"
    img = decode(data)
    assert img.bands == 3 and img.interpretation == "srgb"
    r, g, b = _pixels(data)[8, 8]
    assert r > 180 and g < 90 and b < 90  # full magenta+yellow is red


def test_16bit_png_becomes_8bit() -> None:
    src = (pyvips.Image.black(8, 8, bands=3) + [65535, 32768, 0]).cast("ushort").copy(interpretation="rgb16")
    data = bytes(src.pngsave_buffer())
    assert probe(data).format == "ushort"
    assert tuple(_pixels(data)[0, 0]) == (255, 128, 0)


def test_palette_and_grey_pngs_become_rgb() -> None:
    pal = Image.new("P", (10, 10))
    pal.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    pal.paste(1, (0, 0, 10, 10))
    assert tuple(_pixels(_pil(pal, "PNG"))[3, 3]) == (10, 200, 30)
    grey = _pil(Image.new("L", (10, 10), 99), "PNG")
    assert tuple(_pixels(grey)[0, 0]) == (99, 99, 99)


def test_alpha_is_kept_by_decode() -> None:
    data = _pil(Image.new("RGBA", (10, 10), (1, 2, 3, 4)), "PNG")
    assert tuple(_pixels(data)[0, 0]) == (1, 2, 3, 4)


def test_thumbnail_forces_exact_size_from_bytes() -> None:
    data = _pil(Image.new("RGB", (400, 300), RED), "JPEG")
    img = thumbnail(data, 64, 32)
    assert (img.width, img.height) == (64, 32)


def _png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def test_decompression_bomb_is_rejected_from_the_header() -> None:
    bomb = _png_header_only(100_000, 100_000)
    assert len(bomb) < 200
    with pytest.raises(ImageError, match="decompression bomb"):
        decode(bomb)
    with pytest.raises(ImageError, match="over the limit"):
        probe(bomb)


def test_pixel_ceiling_is_configurable() -> None:
    data = _pil(Image.new("RGB", (100, 100)), "PNG")
    with pytest.raises(ImageError, match="pixels"):
        decode(data, limits=ImageLimits(max_pixels=9_999))


def test_absurd_aspect_ratio_is_rejected() -> None:
    with pytest.raises(ImageError, match="aspect ratio"):
        decode(_pil(Image.new("RGB", (1000, 1)), "PNG"))


@pytest.mark.parametrize("data", [b"", b"not an image at all" * 10])
def test_empty_and_garbage_input_raise_image_error(data: bytes) -> None:
    with pytest.raises(ImageError):
        decode(data)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_file_is_detected(fmt: str) -> None:
    rng = np.random.default_rng(0)
    data = _pil(Image.fromarray(rng.integers(0, 255, (200, 200, 3), dtype=np.uint8)), fmt)
    cut = data[: len(data) // 2]
    with pytest.raises(ImageError):
        to_numpy(decode(cut))  # the header may read fine; the pixels must not
    with pytest.raises(ImageError, match="corrupt or truncated"):
        verify(cut)
    assert verify(data).width == 200
