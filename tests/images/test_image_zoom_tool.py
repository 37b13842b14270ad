"""image_zoom_in_tool and rotate_image end to end through a real BlobStore."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import TOOLS, ToolContext, make_tool
from fasteval.tools.image_tools import ZOOM_OUTPUT_TEXT, ImageZoomInTool, RotateImageTool


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return buf.getvalue()


def _quadrants(w: int = 1000, h: int = 800) -> np.ndarray:
    """Red top-left, green top-right, blue bottom-left, white bottom-right."""
    a = np.zeros((h, w, 3), np.uint8)
    a[: h // 2, : w // 2] = (255, 0, 0)
    a[: h // 2, w // 2 :] = (0, 255, 0)
    a[h // 2 :, : w // 2] = (0, 0, 255)
    a[h // 2 :, w // 2 :] = (255, 255, 255)
    return a


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    blobs = BlobStore(tmp_path / "blobs")
    refs = [blobs.put(_png(_quadrants())), blobs.put(_png(np.full((300, 200, 3), 7, np.uint8)))]
    return ToolContext(blobs=blobs, task=Task(id="t", turns=[]), images=refs, fidelity="fixed")


def _open(ctx: ToolContext, ref: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(ctx.blobs.get(ref))))


def test_tools_are_registered_by_name() -> None:
    assert TOOLS["image_zoom_in_tool"] is ImageZoomInTool
    assert TOOLS["rotate_image"] is RotateImageTool
    assert "0-1000" in ImageZoomInTool.description
    assert ImageZoomInTool.parameters["required"] == ["bbox_2d", "label", "img_idx"]


def test_fixed_fidelity_schema_requires_only_bbox() -> None:
    spec = make_tool("image_zoom_in_tool", fidelity="fixed").spec()
    assert spec["function"]["parameters"]["required"] == ["bbox_2d"]
    ref_spec = make_tool("image_zoom_in_tool").spec()
    assert ref_spec["function"]["parameters"]["required"] == ["bbox_2d", "label", "img_idx"]


async def test_zoom_crops_the_known_region_of_the_original(ctx: ToolContext) -> None:
    # 0-1000 box inside the green quadrant: x 600..900 of 1000 px, y 100..400 of 800 px.
    res = await ImageZoomInTool().run({"bbox_2d": [600, 125, 900, 500], "label": "g", "img_idx": 0}, ctx)
    assert res.status == "ok", res.error
    assert res.output == ZOOM_OUTPUT_TEXT
    assert len(res.images) == 1
    px = _open(ctx, res.images[0])
    h, w = px.shape[:2]
    assert h % 32 == 0 and w % 32 == 0 and h * w >= 65_536
    assert (px[..., 1] > 250).all() and (px[..., 0] < 5).all() and (px[..., 2] < 5).all()
    assert res.extra["size"] == [w, h]


async def test_zoom_reads_bbox_alias_and_clamps(ctx: ToolContext) -> None:
    res = await ImageZoomInTool().run({"bbox": [-50, 600, 400, 1500]}, ctx)
    assert res.status == "ok", res.error
    px = _open(ctx, res.images[0]).astype(int)
    assert (px[..., 2] > 250).all() and (px[..., 0] < 5).all()  # blue quadrant only


async def test_tiny_box_is_upscaled_then_smart_resized(ctx: ToolContext) -> None:
    res = await ImageZoomInTool().run({"bbox_2d": [100, 100, 105, 110]}, ctx)
    assert res.status == "ok", res.error
    px = _open(ctx, res.images[0])
    assert px.shape[0] * px.shape[1] >= 65_536
    assert (px[..., 0] > 250).all()


async def test_zoom_uses_img_idx_in_fixed_fidelity(ctx: ToolContext) -> None:
    res = await ImageZoomInTool().run({"bbox_2d": [0, 0, 1000, 1000], "img_idx": 1}, ctx)
    assert res.status == "ok"
    assert (_open(ctx, res.images[0]) == 7).all()


async def test_reference_fidelity_ignores_img_idx_like_vistahop(ctx: ToolContext) -> None:
    ctx.fidelity = "reference"
    res = await ImageZoomInTool().run({"bbox_2d": [0, 0, 400, 400], "label": "x", "img_idx": 5}, ctx)
    assert res.status == "ok"
    assert (_open(ctx, res.images[0])[..., 0] > 250).all()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({}, "missing bbox_2d"),
        ({"bbox_2d": [1, 2, 3]}, "expected 4 numbers"),
        ({"bbox_2d": [1, 2, 3, "4"]}, "must be numbers"),
        ({"bbox_2d": [1, 2, float("nan"), 4]}, "finite"),
        ({"bbox_2d": [500, 0, 100, 100]}, "x1 must be less than x2"),
        ({"bbox_2d": [0, 500, 100, 100]}, "y1 must be less than y2"),
        ({"bbox_2d": [1001, 0, 2000, 100]}, "empty after clamping"),
        ({"bbox_2d": "not json"}, "expected a list"),
        ({"bbox_2d": [0, 0, 1000, 1]}, "aspect ratio"),
    ],
)
async def test_bad_bbox_is_a_tool_error_the_model_can_read(ctx: ToolContext, args: dict, reason: str) -> None:
    res = await ImageZoomInTool().run(args, ctx)
    assert res.status == "error"
    assert res.error is not None and res.error.startswith("Invalid bbox format: ")
    assert reason in res.error
    assert res.images == []


@pytest.mark.parametrize("idx", [2, -1, 1.5, "0", True])
async def test_bad_img_idx_is_a_tool_error(ctx: ToolContext, idx: object) -> None:
    res = await ImageZoomInTool().run({"bbox_2d": [0, 0, 500, 500], "img_idx": idx}, ctx)
    assert res.status == "error"
    assert "img_idx" in (res.error or "")


async def test_zoom_without_images_fails_cleanly(tmp_path: Path) -> None:
    ctx = ToolContext(blobs=BlobStore(tmp_path), task=Task(id="t", turns=[]), images=[])
    res = await ImageZoomInTool().run({"bbox_2d": [0, 0, 10, 10]}, ctx)
    assert res.status == "error"


async def test_zoom_of_corrupt_original_is_a_tool_error(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    ref = blobs.put(_png(_quadrants())[:200])
    ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[]), images=[ref])
    res = await ImageZoomInTool().run({"bbox_2d": [0, 0, 500, 500]}, ctx)
    assert res.status == "error" and "Cannot read image 0" in (res.error or "")


async def test_rotate_90_clockwise_moves_top_left_to_top_right(ctx: ToolContext) -> None:
    res = await RotateImageTool().run({"angle": 90}, ctx)
    assert res.status == "ok", res.error
    assert "clockwise" in res.output and "counter" not in res.output
    px = _open(ctx, res.images[0])
    assert px.shape[:2] == (1000, 800)
    assert tuple(px[0, -1]) == (255, 0, 0)  # red top-left now top-right (TIR-Bench's clockwise)
    assert tuple(px[0, 0]) == (0, 0, 255)  # blue bottom-left now top-left
    back = await RotateImageTool().run({"angle": -90}, ctx)
    assert tuple(_open(ctx, back.images[0])[-1, 0]) == (255, 0, 0)  # negative turns counter-clockwise


async def test_rotate_any_angle_expands_canvas(ctx: ToolContext) -> None:
    res = await RotateImageTool().run({"angle": 45, "img_idx": 1}, ctx)
    assert res.status == "ok", res.error
    px = _open(ctx, res.images[0])
    assert px.shape[1] > 200 and px.shape[0] > 300
    assert tuple(px[px.shape[0] // 2, px.shape[1] // 2]) == (7, 7, 7)


@pytest.mark.parametrize(
    "args", [{}, {"angle": "left"}, {"angle": float("inf")}, {"angle": 90, "img_idx": 9}]
)
async def test_rotate_bad_arguments_are_tool_errors(ctx: ToolContext, args: dict) -> None:
    res = await RotateImageTool().run(args, ctx)
    assert res.status == "error"
