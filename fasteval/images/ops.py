"""Geometry and tone operations on lazy libvips images, plus Qwen's ``smart_resize`` rule.

Operations take and return ``pyvips.Image`` and stay lazy: nothing is decoded until the caller
encodes the result, so a crop of a 6944x9280 photo only decodes the rows it needs.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, TypeGuard

import pyvips

from fasteval.images.decode import ImageError

Box = tuple[int, int, int, int]
"""Pixel box ``(left, top, right, bottom)``, right/bottom exclusive."""

QWEN_MAX_RATIO = 200


def _round_by(x: float, factor: int) -> int:
    # Python's round (banker's rounding) on purpose: it is what qwen_vl_utils does.
    return round(x / factor) * factor


def _floor_by(x: float, factor: int) -> int:
    return math.floor(x / factor) * factor


def _ceil_by(x: float, factor: int) -> int:
    return math.ceil(x / factor) * factor


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = 56 * 56,
    max_pixels: int = 14 * 14 * 4 * 1280,
    max_ratio: float = QWEN_MAX_RATIO,
) -> tuple[int, int]:
    """Qwen-VL's target size: sides multiples of ``factor``, area within [min, max] pixels.

    Returns ``(height, width)`` like qwen_vl_utils, and raises ImageError for an aspect ratio
    over ``max_ratio`` (the model cannot take such a strip).
    """
    if height <= 0 or width <= 0:
        raise ImageError(f"cannot resize a zero-size image ({width}x{height})")
    ratio = max(height, width) / min(height, width)
    if ratio > max_ratio:
        raise ImageError(f"absolute aspect ratio must be at most {max_ratio:g}, got {ratio:.1f}")
    h_bar = max(factor, _round_by(height, factor))
    w_bar = max(factor, _round_by(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, _floor_by(height / beta, factor))
        w_bar = max(factor, _floor_by(width / beta, factor))
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by(height * beta, factor)
        w_bar = _ceil_by(width * beta, factor)
    return h_bar, w_bar


MAX_MAGNITUDE = 1e15
"""The largest number a model's argument may hold (past it no pixel count or angle is meant)."""
MAX_COORDINATE = 1_000_000
"""The largest box coordinate in pixels (no image we decode has a side near it)."""


def real_number(v: Any, limit: float = MAX_MAGNITUDE) -> TypeGuard[int | float]:
    """Whether ``v`` is a number we can compute with: an int or float (not a bool) within
    ``±limit``. An int is compared exactly, so a 400-digit integer is refused here instead of
    raising OverflowError in ``math.isfinite`` or ``float()``; NaN fails every comparison."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return -limit <= v <= limit


def parse_bbox(value: Any) -> tuple[float, float, float, float]:
    """Validate a model-supplied box ``[x1, y1, x2, y2]``: 4 finite numbers, x1<x2, y1<y2.

    A JSON string of such a list is accepted too, since models sometimes quote arguments.
    Raises ImageError with a reason the model can act on.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ImageError(
                f"expected a list of 4 numbers [x1, y1, x2, y2], got the string {value!r}"
            ) from None
    if not isinstance(value, list | tuple):
        raise ImageError(f"expected a list of 4 numbers [x1, y1, x2, y2], got {type(value).__name__}")
    if len(value) != 4:
        raise ImageError(f"expected 4 numbers [x1, y1, x2, y2], got {len(value)}")
    nums: list[float] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ImageError(f"coordinates must be numbers, got {v!r}")
        if not real_number(v, MAX_COORDINATE):
            raise ImageError(f"coordinates must be finite numbers within ±{MAX_COORDINATE:,}, got {str(v)[:40]}")
        nums.append(float(v))
    x1, y1, x2, y2 = nums
    if not x1 < x2:
        raise ImageError(f"x1 must be less than x2, got x1={x1:g}, x2={x2:g}")
    if not y1 < y2:
        raise ImageError(f"y1 must be less than y2, got y1={y1:g}, y2={y2:g}")
    return x1, y1, x2, y2


def pixel_box(
    bbox: tuple[float, float, float, float], width: int, height: int, *, normalised: bool = False
) -> Box:
    """Map a validated bbox to pixels, clamped to the image; raises if nothing is left.

    ``normalised`` reads coordinates as 0-1000 (Qwen grounding), divided by 1000 and clamped
    to [0, 1]. Left/top round down and right/bottom round up so a thin box keeps >= 1 px.
    """
    x1, y1, x2, y2 = bbox
    if normalised:
        x1, x2 = (min(max(v / 1000.0, 0.0), 1.0) * width for v in (x1, x2))
        y1, y2 = (min(max(v / 1000.0, 0.0), 1.0) * height for v in (y1, y2))
    left = min(max(math.floor(x1), 0), width)
    top = min(max(math.floor(y1), 0), height)
    right = min(max(math.ceil(x2), 0), width)
    bottom = min(max(math.ceil(y2), 0), height)
    if right <= left or bottom <= top:
        scale = "0-1000 normalised" if normalised else "pixel"
        raise ImageError(
            f"box {list(bbox)} ({scale}) is empty after clamping to the image "
            f"({width}x{height} px); coordinates must fall inside the image"
        )
    return left, top, right, bottom


def crop(img: Any, box: Box) -> Any:
    """Crop a pixel box (from ``pixel_box``)."""
    left, top, right, bottom = box
    return img.crop(left, top, right - left, bottom - top)


def resize(img: Any, width: int, height: int) -> Any:
    """Resize to exactly width x height (lanczos3 down, bicubic-like up)."""
    if width <= 0 or height <= 0:
        raise ImageError(f"cannot resize to {width}x{height}")
    if (width, height) == (img.width, img.height):
        return img
    return img.resize(width / img.width, vscale=height / img.height, kernel="lanczos3")


def upscale_min_side(img: Any, min_side: int = 28) -> Any:
    """Upscale so both sides are at least ``min_side`` (aspect kept): tiny crops become visible."""
    short = min(img.width, img.height)
    if short >= min_side:
        return img
    scale = min_side / short
    return resize(img, max(min_side, round(img.width * scale)), max(min_side, round(img.height * scale)))


def rotate(img: Any, angle: float, background: tuple[int, ...] = (0, 0, 0)) -> Any:
    """Rotate ``angle`` degrees counter-clockwise, expanding the canvas to fit (PIL expand=True).

    Right angles are exact pixel moves; other angles interpolate bilinearly and fill the new
    corners with ``background``.
    """
    if not real_number(angle):
        raise ImageError(f"angle must be a finite number, got {str(angle)[:40]}")
    a = angle % 360.0
    right_angles = {0.0: None, 90.0: "d270", 180.0: "d180", 270.0: "d90"}
    if a in right_angles:
        turn = right_angles[a]
        return img if turn is None else img.rot(turn)
    bg = list(background) + [255] * max(0, img.bands - len(background))
    # libvips rotates clockwise for positive angles.
    out = img.rotate(-a, background=bg[: img.bands], interpolate=pyvips.Interpolate.new("bilinear"))
    return out.cast("uchar") if out.format != "uchar" else out


def flip(img: Any, direction: Literal["horizontal", "vertical"]) -> Any:
    """Mirror left-right (``horizontal``) or top-bottom (``vertical``)."""
    if direction not in ("horizontal", "vertical"):
        raise ImageError(f"flip direction must be 'horizontal' or 'vertical', got {direction!r}")
    return img.flip(direction)


def adjust(img: Any, *, brightness: float = 1.0, contrast: float = 1.0, gamma: float = 1.0) -> Any:
    """Tone changes with PIL ImageEnhance meaning: factors of 1.0 leave the image unchanged.

    brightness multiplies; contrast scales distance from the mean grey; gamma > 1 brightens
    (out = 255 * (in/255) ** (1/gamma)). Alpha is left alone.
    """
    for name, v in (("brightness", brightness), ("contrast", contrast), ("gamma", gamma)):
        if not real_number(v) or v < 0:
            raise ImageError(f"{name} must be a finite non-negative number, got {str(v)[:40]}")
    if gamma == 0:
        raise ImageError("gamma must be positive")
    alpha = img.extract_band(3) if img.bands == 4 else None
    rgb = img.extract_band(0, n=3) if img.bands == 4 else img
    out = rgb.cast("float")
    if brightness != 1.0:
        out = out * brightness
    if contrast != 1.0:
        # PIL takes the mean of the greyscale image as the pivot.
        mean = float(rgb.colourspace("b-w").avg()) if rgb.bands >= 3 else float(rgb.avg())
        out = (out - mean) * contrast + mean
    if gamma != 1.0:
        out = (_clip(out) / 255.0) ** (1.0 / gamma) * 255.0
    out = _clip(out).rint().cast("uchar")
    return out.bandjoin(alpha) if alpha is not None else out


def _clip(img: Any) -> Any:
    """Clamp a float image to [0, 255] before a power or a cast to 8 bits."""
    lo = (img < 0).ifthenelse(0, img)
    return (lo > 255).ifthenelse(255, lo)


def grid_boxes(width: int, height: int, rows: int, cols: int) -> list[Box]:
    """Row-major tiles covering every pixel; edges split by integer division."""
    if rows < 1 or cols < 1 or rows > height or cols > width:
        raise ImageError(f"cannot split {width}x{height} into {rows}x{cols} tiles")
    xs = [width * i // cols for i in range(cols + 1)]
    ys = [height * j // rows for j in range(rows + 1)]
    return [(xs[i], ys[j], xs[i + 1], ys[j + 1]) for j in range(rows) for i in range(cols)]


def grid_split(img: Any, rows: int, cols: int) -> list[Any]:
    """Split into rows x cols tiles, row-major (inverse of ``grid_join``)."""
    return [crop(img, box) for box in grid_boxes(img.width, img.height, rows, cols)]


def grid_join(tiles: list[Any], cols: int) -> Any:
    """Reassemble row-major tiles; tiles in a column share a width, in a row a height."""
    if not tiles or cols < 1 or len(tiles) % cols:
        raise ImageError(f"cannot join {len(tiles)} tiles into rows of {cols}")
    rows = []
    for r in range(0, len(tiles), cols):
        row = tiles[r]
        for t in tiles[r + 1 : r + cols]:
            row = row.join(t, "horizontal")
        rows.append(row)
    out = rows[0]
    for row in rows[1:]:
        out = out.join(row, "vertical")
    return out
