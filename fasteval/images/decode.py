"""Decoding benchmark images safely and lazily with libvips.

Benchmarks ship JPEG, MPO, PNG (8/16-bit, palette), WebP, GIF and TIFF, some as large as
6944x9280. libvips reads only the header when an image is opened and decodes pixels on demand,
so a crop or a thumbnail never holds the whole decoded image. Every limit is checked from the
header, before a single pixel is decoded, and every failure is one exception class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pyvips

Access = Literal["sequential", "random"]

# EXIF orientations 5-8 swap width and height once applied.
_TRANSPOSING_ORIENTATIONS = frozenset({5, 6, 7, 8})


class ImageError(ValueError):
    """Bad image input: corrupt, truncated, empty, too many pixels or an absurd shape.

    One class so that callers (tools, encoders) can turn any image problem into an error value
    on the record instead of an exception that kills the sweep.
    """


@dataclass(slots=True, frozen=True)
class ImageLimits:
    """What we agree to decode; checked from the header so bombs cost nothing."""

    max_pixels: int = 150_000_000
    """Width x height ceiling; 6944x9280 (64 M) fits, a 100k x 100k bomb does not."""
    max_aspect: float = 500.0
    """Longest over shortest side; Qwen's own resize rule stops at 200."""
    fail_on: str = "truncated"
    """libvips ``fail_on``: reject truncated files, tolerate benign decoder warnings."""


DEFAULT_LIMITS = ImageLimits()


@dataclass(slots=True, frozen=True)
class ImageInfo:
    """Header facts of an image, with sizes as displayed (EXIF orientation applied)."""

    width: int
    height: int
    loader: str
    orientation: int
    bands: int
    format: str
    interpretation: str

    @property
    def mime(self) -> str:
        return mime_for_loader(self.loader)


_LOADER_MIME = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "gif": "image/gif",
    "tiff": "image/tiff",
    "heif": "image/heif",
    "svg": "image/svg+xml",
}


def mime_for_loader(loader: str) -> str:
    """``jpegload_buffer`` -> ``image/jpeg``; unknown loaders map to octet-stream."""
    for key, mime in _LOADER_MIME.items():
        if loader.startswith(key):
            return mime
    return "application/octet-stream"


@contextmanager
def vips_errors(what: str) -> Iterator[None]:
    """Turn libvips errors, which surface lazily when pixels are read, into ImageError."""
    try:
        yield
    except pyvips.Error as e:
        detail = " ".join(str(e).split())
        raise ImageError(f"{what}: {detail}") from None


def _orientation(img: Any) -> int:
    if img.get_typeof("orientation") == 0:
        return 1
    try:
        value = int(img.get("orientation"))
    except (pyvips.Error, TypeError, ValueError):
        return 1
    return value if 1 <= value <= 8 else 1


def _open(data: bytes, access: Access, limits: ImageLimits) -> Any:
    if not data:
        raise ImageError("empty image data (0 bytes)")
    with vips_errors("cannot read image header"):
        img = pyvips.Image.new_from_buffer(data, "", access=access, fail_on=limits.fail_on)
    check_shape(img.width, img.height, limits)
    return img


def check_shape(width: int, height: int, limits: ImageLimits = DEFAULT_LIMITS) -> None:
    """Reject zero-size, decompression-bomb and absurd-aspect shapes before decoding."""
    if width <= 0 or height <= 0:
        raise ImageError(f"zero-size image ({width}x{height})")
    if width * height > limits.max_pixels:
        raise ImageError(
            f"image has {width}x{height} = {width * height:,} pixels, over the limit of "
            f"{limits.max_pixels:,} (possible decompression bomb)"
        )
    aspect = max(width, height) / min(width, height)
    if aspect > limits.max_aspect:
        raise ImageError(
            f"absurd aspect ratio {aspect:.0f}:1 ({width}x{height}); limit {limits.max_aspect:g}"
        )


def probe(data: bytes, limits: ImageLimits = DEFAULT_LIMITS) -> ImageInfo:
    """Read the header only: size as displayed, loader, orientation. Raises ImageError."""
    img = _open(data, "sequential", limits)
    orientation = _orientation(img)
    w, h = img.width, img.height
    if orientation in _TRANSPOSING_ORIENTATIONS:
        w, h = h, w
    loader = str(img.get("vips-loader")) if img.get_typeof("vips-loader") else ""
    return ImageInfo(w, h, loader, orientation, img.bands, img.format, img.interpretation)


def to_srgb8(img: Any) -> Any:
    """Any colour space and depth (CMYK, grey, 16-bit, palette) to 8-bit sRGB, alpha kept.

    Providers and encoders expect 8-bit RGB; doing it once here keeps every op simple.
    """
    if img.interpretation == "cmyk":
        # Uses the embedded profile when there is one, else libvips' built-in CMYK profile.
        img = img.icc_transform("srgb", input_profile="cmyk", embedded=True)
    if img.interpretation != "srgb" or img.format != "uchar" or img.bands < 3:
        img = img.colourspace("srgb")
    if img.format != "uchar":
        img = img.cast("uchar")
    if img.bands > 4:
        img = img.extract_band(0, n=4)
    return img


def decode(data: bytes, *, limits: ImageLimits = DEFAULT_LIMITS, access: Access = "sequential") -> Any:
    """Open lazily as 8-bit sRGB (alpha kept) with EXIF orientation applied.

    Multi-image files (MPO, GIF, TIFF, animated WebP) give their first image. Header problems
    raise ImageError here; pixel problems (truncation) raise pyvips.Error when pixels are read,
    so materialise inside ``vips_errors``. Sequential access streams top to bottom, which is
    all a crop or downsize needs; a rotating orientation needs random access, so it reopens.
    """
    img = _open(data, access, limits)
    if _orientation(img) != 1:
        if access == "sequential":
            img = _open(data, "random", limits)
        with vips_errors("cannot apply EXIF orientation"):
            img = img.autorot()
    with vips_errors("cannot convert colour space"):
        return to_srgb8(img)


def thumbnail(
    data: bytes, width: int, height: int, *, limits: ImageLimits = DEFAULT_LIMITS, force: bool = True
) -> Any:
    """Resize straight from the encoded bytes, using shrink-on-load (JPEG, WebP) for speed.

    ``force`` gives exactly width x height (smart_resize targets); otherwise fit inside.
    Orientation is applied; the result is 8-bit sRGB.
    """
    _open(data, "sequential", limits)
    with vips_errors("cannot resize image"):
        img = pyvips.Image.thumbnail_buffer(
            data,
            width,
            height=height,
            size="force" if force else "both",
            option_string=f"fail_on={limits.fail_on}",
        )
        return to_srgb8(img)


def drop_alpha(img: Any, background: tuple[int, int, int] | None = None) -> Any:
    """RGB without alpha: ``background=None`` discards it (PIL ``convert("RGB")``), else flattens.

    VisualToolBench converts with PIL (alpha dropped); Qwen's ``to_rgb`` pastes on white.
    """
    if img.bands == 3:
        return img
    if img.bands == 4 and background is not None:
        return img.flatten(background=list(background)).cast("uchar")
    return img.extract_band(0, n=3)


def to_numpy(img: Any) -> Any:
    """Render a lazy image to an (h, w, bands) uint8 array; decode failures become ImageError."""
    with vips_errors("cannot decode image"):
        return img.numpy()


def verify(data: bytes, limits: ImageLimits = DEFAULT_LIMITS) -> ImageInfo:
    """Decode every pixel once, streaming (constant memory), to detect truncation or corruption.

    Loaders only find a broken file when its pixels are read; call this where a job should be
    rejected up front rather than at its first crop.
    """
    info = probe(data, limits)
    img = _open(data, "sequential", limits)
    with vips_errors("corrupt or truncated image"):
        img.avg()
    return info
