"""smart_resize values (hand-checked against the Qwen rule), bbox validation, pixel ops."""

from __future__ import annotations

import numpy as np
import pytest
import pyvips

from fasteval.images import (
    ImageError,
    adjust,
    crop,
    flip,
    grid_join,
    grid_split,
    parse_bbox,
    pixel_box,
    resize,
    rotate,
    smart_resize,
    to_numpy,
    upscale_min_side,
)


def _img(arr: np.ndarray) -> pyvips.Image:
    return pyvips.Image.new_from_array(arr, interpretation="srgb")


def _ramp(h: int = 53, w: int = 101) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x % 256, y % 256, (x + y) % 256], axis=-1).astype(np.uint8)


@pytest.mark.parametrize(
    ("hw", "kwargs", "expected"),
    [
        # 39*28 x 69*28 is over 1,003,520 px; beta = sqrt(1080*1920/1003520) = 1.4375 -> floor.
        ((1080, 1920), {}, (728, 1316)),
        # VistaHop profile: 3008x4000 > 8,294,400 -> beta 1.2028 -> 77*32 x 103*32.
        ((3000, 4000), {"factor": 32, "min_pixels": 65_536, "max_pixels": 8_294_400}, (2464, 3296)),
        # Under min_pixels: beta = sqrt(65536/5000) = 3.62 -> ceil(11.3)*32, ceil(5.66)*32.
        ((100, 50), {"factor": 32, "min_pixels": 65_536, "max_pixels": 8_294_400}, (384, 192)),
        # Banker's rounding like qwen_vl_utils: 70/28 = 2.5 rounds to 2, 42/28 = 1.5 to 2.
        ((70, 100), {}, (56, 112)),
        ((42, 100), {}, (56, 112)),
        ((1, 200), {}, (28, 196)),
        ((224, 224), {}, (224, 224)),
    ],
)
def test_smart_resize_matches_hand_checked_values(
    hw: tuple[int, int], kwargs: dict, expected: tuple[int, int]
) -> None:
    assert smart_resize(*hw, **kwargs) == expected


def test_smart_resize_rejects_aspect_over_200() -> None:
    with pytest.raises(ImageError, match="aspect ratio"):
        smart_resize(1, 201)
    with pytest.raises(ImageError):
        smart_resize(0, 10)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "expected a list"),
        ([1, 2, 3], "expected 4 numbers"),
        ([1, 2, 3, 4, 5], "expected 4 numbers"),
        ([1, 2, None, 4], "must be numbers"),
        ([True, 2, 3, 4], "must be numbers"),
        ([1, 2, float("inf"), 4], "finite"),
        ([5, 2, 5, 4], "x1 must be less than x2"),
        ([1, 4, 5, 4], "y1 must be less than y2"),
        ("[1, 2", "expected a list"),
    ],
)
def test_parse_bbox_rejects_with_actionable_reason(value: object, message: str) -> None:
    with pytest.raises(ImageError, match=message):
        parse_bbox(value)


def test_parse_bbox_accepts_lists_tuples_and_json_strings() -> None:
    assert parse_bbox([1, 2, 3.5, 4]) == (1.0, 2.0, 3.5, 4.0)
    assert parse_bbox("[1, 2, 3, 4]") == (1.0, 2.0, 3.0, 4.0)


def test_pixel_box_clamps_and_scales() -> None:
    assert pixel_box((-10, -5, 50, 500), 100, 80) == (0, 0, 50, 80)
    # 0-1000: 250/1000 of 101 px = 25.25 -> 25 (floor); 500/1000 of 53 = 26.5 -> 27 (ceil).
    assert pixel_box((250, 0, 1000, 500), 101, 53, normalised=True) == (25, 0, 101, 27)
    assert pixel_box((0, 0, 2000, 2000), 101, 53, normalised=True) == (0, 0, 101, 53)
    with pytest.raises(ImageError, match="empty after clamping"):
        pixel_box((200, 0, 300, 10), 100, 80)
    with pytest.raises(ImageError, match="empty after clamping"):
        pixel_box((-30, -30, -1, -1), 100, 80, normalised=True)


def test_crop_returns_exact_pixels() -> None:
    arr = _ramp()
    out = to_numpy(crop(_img(arr), (10, 5, 30, 25)))
    assert np.array_equal(out, arr[5:25, 10:30])


def test_resize_and_upscale_min_side() -> None:
    img = _img(_ramp())
    assert (resize(img, 20, 10).width, resize(img, 20, 10).height) == (20, 10)
    small = upscale_min_side(crop(img, (0, 0, 10, 4)), 28)
    assert (small.width, small.height) == (70, 28)
    assert upscale_min_side(img, 28) is img


def test_rotate_right_angles_are_exact_and_counter_clockwise() -> None:
    arr = _ramp(4, 6)
    img = _img(arr)
    assert np.array_equal(to_numpy(rotate(img, 90)), np.rot90(arr, 1))
    assert np.array_equal(to_numpy(rotate(img, -90)), np.rot90(arr, -1))
    assert np.array_equal(to_numpy(rotate(img, 180)), np.rot90(arr, 2))
    assert np.array_equal(to_numpy(rotate(img, 720)), arr)


def test_rotate_any_angle_expands_canvas() -> None:
    img = _img(np.full((100, 100, 3), 200, np.uint8))
    out = rotate(img, 30)
    assert 130 <= out.width <= 140 and 130 <= out.height <= 140
    px = to_numpy(out)
    assert tuple(px[68, 68]) == (200, 200, 200) and tuple(px[0, 0]) == (0, 0, 0)
    with pytest.raises(ImageError):
        rotate(img, float("nan"))


def test_flip() -> None:
    arr = _ramp(4, 6)
    assert np.array_equal(to_numpy(flip(_img(arr), "horizontal")), arr[:, ::-1])
    assert np.array_equal(to_numpy(flip(_img(arr), "vertical")), arr[::-1])
    with pytest.raises(ImageError):
        flip(_img(arr), "diagonal")  # type: ignore[arg-type]


def test_adjust_brightness_contrast_gamma() -> None:
    arr = np.full((4, 4, 3), 100, np.uint8)
    arr[0, 0] = 200
    img = _img(arr)
    assert np.array_equal(to_numpy(adjust(img)), arr)
    assert int(to_numpy(adjust(img, brightness=2.0))[1, 1, 0]) == 200
    assert int(to_numpy(adjust(img, brightness=3.0))[0, 0, 0]) == 255  # clipped
    flat = to_numpy(adjust(img, contrast=0.0))
    assert (flat == flat[0, 0]).all()  # zero contrast is the mean grey everywhere
    assert int(to_numpy(adjust(img, gamma=2.0))[1, 1, 0]) == round(255 * (100 / 255) ** 0.5)
    with pytest.raises(ImageError):
        adjust(img, gamma=0)


def test_adjust_keeps_alpha() -> None:
    arr = np.full((2, 2, 4), 100, np.uint8)
    out = to_numpy(adjust(_img(arr), brightness=2.0))
    assert tuple(out[0, 0]) == (200, 200, 200, 100)


def test_grid_split_and_join_round_trip_uneven_sizes() -> None:
    arr = _ramp(53, 101)
    tiles = grid_split(_img(arr), rows=3, cols=4)
    assert len(tiles) == 12
    assert sum(t.width for t in tiles[:4]) == 101 and sum(t.height for t in tiles[::4]) == 53
    assert np.array_equal(to_numpy(grid_join(tiles, cols=4)), arr)
    with pytest.raises(ImageError):
        grid_join(tiles, cols=5)
    with pytest.raises(ImageError):
        grid_split(_img(arr), rows=0, cols=2)
