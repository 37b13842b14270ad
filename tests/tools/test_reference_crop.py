"""image_zoom_in_tool under ``reference``: the VistaHop runner's integer rounding and min-side stretch."""

from __future__ import annotations

import pyvips

from fasteval.images.decode import probe
from fasteval.images.ops import smart_resize
from fasteval.tools.image_tools import reference_crop


def _image(width: int, height: int) -> bytes:
    # Column index as the red value, so the crop's right edge is visible in its pixels.
    x = pyvips.Image.xyz(width, height)[0]
    img = (x * 255 / max(1, width - 1)).cast("uchar")
    return bytes(img.bandjoin([img, img]).pngsave_buffer())


def test_edges_truncate_like_int_and_short_sides_stretch_independently() -> None:
    data = _image(999, 800)
    # x2 = 0.5 * 999 = 499.5: the runner's int() keeps 499 columns (floor/ceil would keep 500).
    out = reference_crop(data, (0, 0, 500, 500))
    info = probe(out.data)
    h, w = smart_resize(400, 499, factor=32, min_pixels=65_536, max_pixels=8_294_400)
    assert (info.width, info.height) == (w, h) == (out.width, out.height)
    # 10 x 40 px: only the short side is stretched to 28 (28 x 40), then smart_resize.
    tiny = reference_crop(data, (0, 0, 10, 50))
    h, w = smart_resize(40, 28, factor=32, min_pixels=65_536, max_pixels=8_294_400)
    assert (tiny.width, tiny.height) == (w, h)
    assert abs(tiny.width / tiny.height - 28 / 40) < 0.1  # not the crop's 1:4 aspect
