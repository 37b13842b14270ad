"""Per-benchmark encoding of images for provider requests, with optional size budgets.

Each suite shows images to the model its own way (benchmarks.md §5): VisualToolBench re-encodes
everything as RGB JPEG q85, TIR-Bench sends the original bytes, VistaHop sends a PNG after
Qwen's smart_resize. A provider may also cap bytes or pixels per image; then we downsize
rather than fail, because a smaller image is a better outcome than a lost job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fasteval.images.decode import (
    DEFAULT_LIMITS,
    ImageError,
    ImageLimits,
    decode,
    drop_alpha,
    probe,
    thumbnail,
    vips_errors,
)
from fasteval.images.ops import smart_resize
from fasteval.images.processor import ProcessorResize

PROFILES = ("jpeg85", "original", "png_smart")

# VistaHop / Qwen-VL view of an image: factor 32, 256x256 .. 3840x2160 pixels.
PNG_SMART_FACTOR = 32
PNG_SMART_MIN_PIXELS = 65_536
PNG_SMART_MAX_PIXELS = 8_294_400

_MAX_SHRINK_STEPS = 12
_MIN_SIDE = 16


@dataclass(slots=True, frozen=True)
class EncodedImage:
    mime: str
    data: bytes
    width: int
    height: int


def png_bytes(img: Any) -> bytes:
    """Lossless PNG without metadata (tool outputs, VistaHop inputs)."""
    with vips_errors("cannot encode PNG"):
        return bytes(img.pngsave_buffer(keep="none"))


def jpeg_bytes(img: Any, quality: int = 85) -> bytes:
    """RGB JPEG without metadata; alpha is dropped like PIL ``convert("RGB")``."""
    with vips_errors("cannot encode JPEG"):
        return bytes(drop_alpha(img).jpegsave_buffer(Q=quality, keep="none"))


def _fit_pixels(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    if max_pixels is None or width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def _plan_size(profile: str, width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """Target (width, height) for a profile before any byte budget applies."""
    if profile == "png_smart":
        cap = PNG_SMART_MAX_PIXELS if max_pixels is None else min(PNG_SMART_MAX_PIXELS, max_pixels)
        h, w = smart_resize(
            height, width, factor=PNG_SMART_FACTOR, min_pixels=min(PNG_SMART_MIN_PIXELS, cap), max_pixels=cap
        )
        return w, h
    return _fit_pixels(width, height, max_pixels)


def _render(
    data: bytes, profile: str, fmt: str, width: int, height: int, native: tuple[int, int], limits: ImageLimits
) -> bytes:
    if (width, height) == native:
        img = decode(data, limits=limits)
    else:
        # thumbnail uses shrink-on-load, so a 6944x9280 JPEG never fully decodes at full size.
        img = thumbnail(data, width, height, limits=limits)
    if fmt == "image/jpeg":
        return jpeg_bytes(img, 85)
    if profile == "png_smart":
        # Qwen's to_rgb pastes transparency on white before resizing.
        img = drop_alpha(img, background=(255, 255, 255))
    return png_bytes(img)


def encode_image(
    data: bytes,
    profile: str,
    max_bytes: int | None = None,
    max_pixels: int | None = None,
    *,
    limits: ImageLimits = DEFAULT_LIMITS,
) -> tuple[str, bytes]:
    """Encode image bytes for a provider: returns ``(mime, bytes)``.

    Profiles: ``jpeg85`` (RGB JPEG q85), ``original`` (the bytes as given), ``png_smart`` (PNG
    after smart_resize, factor 32, 65,536..8,294,400 px). With ``max_pixels``/``max_bytes`` the
    image is downsized until it fits; ``original`` then re-encodes (JPEG for JPEG input, else PNG).
    Raises ImageError for bad input or a budget no image of >= 16 px per side can meet.
    """
    enc = encode(data, profile, max_bytes, max_pixels, limits=limits)
    return enc.mime, enc.data


def encode(
    data: bytes,
    profile: str,
    max_bytes: int | None = None,
    max_pixels: int | None = None,
    *,
    limits: ImageLimits = DEFAULT_LIMITS,
    processor: ProcessorResize | None = None,
) -> EncodedImage:
    """Like ``encode_image`` but also reports the output size.

    ``processor``: the model's image processor resize (a model's ``image_resize`` switch); an
    image it would shrink is shrunk here to exactly its target, after the profile's own plan.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown image profile {profile!r}; known: {', '.join(PROFILES)}")
    if max_bytes is not None and max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    if max_pixels is not None and max_pixels <= 0:
        raise ValueError(f"max_pixels must be positive, got {max_pixels}")
    info = probe(data, limits)
    native = (info.width, info.height)
    width, height = _plan_size(profile, info.width, info.height, max_pixels)
    target = processor.target(width, height) if processor is not None else None
    if target is not None:
        width, height = target

    if profile == "original":
        fits_bytes = max_bytes is None or len(data) <= max_bytes
        if fits_bytes and (width, height) == native:
            return EncodedImage(info.mime, data, info.width, info.height)
        fmt = "image/jpeg" if info.mime == "image/jpeg" else "image/png"
    else:
        fmt = "image/jpeg" if profile == "jpeg85" else "image/png"

    out = _render(data, profile, fmt, width, height, native, limits)
    for _ in range(_MAX_SHRINK_STEPS):
        if max_bytes is None or len(out) <= max_bytes:
            return EncodedImage(fmt, out, width, height)
        # Encoded size grows roughly with area; aim a little under the budget.
        scale = min(0.9, math.sqrt(max_bytes / len(out)) * 0.95)
        width, height = math.floor(width * scale), math.floor(height * scale)
        if min(width, height) < _MIN_SIDE:
            break
        if profile == "png_smart":
            h, w = smart_resize(
                height, width, factor=PNG_SMART_FACTOR, min_pixels=1, max_pixels=width * height
            )
            width, height = w, h
        out = _render(data, profile, fmt, width, height, native, limits)
    raise ImageError(
        f"cannot fit image in {max_bytes:,} bytes (last try {len(out):,} bytes at {width}x{height})"
    )
