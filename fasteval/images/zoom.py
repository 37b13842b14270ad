"""Crops and rotations of a task's original image, as the image tools return them.

Tools always work from the original full-resolution bytes, never from a previous crop or the
resized view the model saw, so repeated zooms do not compound resampling loss.
"""

from __future__ import annotations

from typing import Any

from fasteval.images.decode import DEFAULT_LIMITS, ImageLimits, decode, drop_alpha, vips_errors
from fasteval.images.ops import crop, pixel_box, resize, rotate, smart_resize, upscale_min_side
from fasteval.images.render import (
    PNG_SMART_FACTOR,
    PNG_SMART_MAX_PIXELS,
    PNG_SMART_MIN_PIXELS,
    EncodedImage,
    png_bytes,
)

ZOOM_MIN_SIDE = 28


def crop_original(
    data: bytes,
    bbox: tuple[float, float, float, float],
    *,
    normalised: bool = True,
    min_side: int = ZOOM_MIN_SIDE,
    factor: int = PNG_SMART_FACTOR,
    min_pixels: int = PNG_SMART_MIN_PIXELS,
    max_pixels: int = PNG_SMART_MAX_PIXELS,
    limits: ImageLimits = DEFAULT_LIMITS,
) -> EncodedImage:
    """VistaHop's zoom: crop a validated bbox, upscale sides under 28 px, smart_resize, PNG.

    ``bbox`` must come from ``parse_bbox``; ``normalised`` reads it as 0-1000. Raises
    ImageError for an unreadable image, an empty box or a crop too thin to resize.
    """
    img = decode(data, limits=limits)
    region: Any = crop(img, pixel_box(bbox, img.width, img.height, normalised=normalised))
    region = upscale_min_side(region, min_side)
    h, w = smart_resize(
        region.height, region.width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels
    )
    with vips_errors("cannot crop image"):
        out = resize(drop_alpha(region, background=(255, 255, 255)), w, h)
        return EncodedImage("image/png", png_bytes(out), w, h)


def rotate_original(data: bytes, angle: float, *, limits: ImageLimits = DEFAULT_LIMITS) -> EncodedImage:
    """Rotate the original ``angle`` degrees counter-clockwise (canvas expanded), as PNG."""
    # Rotated output rows read input columns, so the source needs random access.
    img = decode(data, limits=limits, access="random")
    with vips_errors("cannot rotate image"):
        out = rotate(img, angle)
        return EncodedImage("image/png", png_bytes(out), out.width, out.height)
