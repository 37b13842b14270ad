"""Image tools the model calls: VistaHop's zoom-in and TIR-Bench's rotate diagnostic.

Both work on the task's ORIGINAL images (``ctx.images``), never on a crop or the resized view
the model saw. Bad arguments come back as ``ToolResult.fail`` with a reason the model can act
on; image work runs in a thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from fasteval.core.options import OptionSchema
from fasteval.core.types import ImageRef
from fasteval.images import ImageError, crop_original, parse_bbox, real_number, rotate_original
from fasteval.images.decode import decode, drop_alpha, vips_errors
from fasteval.images.ops import crop, resize, smart_resize
from fasteval.images.render import (
    PNG_SMART_FACTOR,
    PNG_SMART_MAX_PIXELS,
    PNG_SMART_MIN_PIXELS,
    EncodedImage,
    png_bytes,
)
from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool

ZOOM_OUTPUT_TEXT = "Here is the zoomed image:"


def _zoom_parameters(fidelity: str) -> dict[str, Any]:
    """VistaHop's schema marks all three required; ``fixed`` only needs the box."""
    required = ["bbox_2d", "label", "img_idx"] if fidelity == "reference" else ["bbox_2d"]
    return {
        "type": "object",
        "properties": {
            "bbox_2d": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 4,
                "maxItems": 4,
                "description": (
                    "The region to zoom into as [x1, y1, x2, y2], with coordinates normalised "
                    "to 0-1000 of the image width and height (0,0 is the top-left corner)."
                ),
            },
            "label": {"type": "string", "description": "A short name for the object in the region."},
            "img_idx": {
                "type": "number",
                "description": "Index of the image to zoom into (0 for the first image).",
            },
        },
        "required": required,
    }


def _image_index(args: dict[str, Any], ctx: ToolContext, key: str = "img_idx") -> int | str:
    """The requested original-image index, or an error message for the model."""
    raw = args.get(key, 0)
    if raw is None:
        raw = 0
    if not real_number(raw) or raw != int(raw):
        return f"Invalid {key}: expected a whole number, got {str(raw)[:40]}"
    idx = int(raw)
    if not ctx.images:
        return "No image is available in this task."
    if not 0 <= idx < len(ctx.images):
        return f"Invalid {key}: {idx} is out of range; there are {len(ctx.images)} image(s), indexed from 0"
    return idx


def _read(ctx: ToolContext, ref: ImageRef) -> bytes:
    return ctx.blobs.get(ref)


REFERENCE_MIN_SIDE = 28


def reference_crop(data: bytes, bbox: tuple[float, float, float, float]) -> EncodedImage:
    """VistaHop's runner crop, rounding for rounding: 0-1000 box / 1000, left/top clamped at 0 and
    right/bottom at 1, every edge truncated with ``int()``; a side under 28 px is stretched to 28
    on its own (aspect not kept), then smart_resize (factor 32, 65,536..8,294,400 px), PNG."""
    img = decode(data)
    x1, y1, x2, y2 = (v / 1000.0 for v in bbox)
    x1, y1, x2, y2 = max(0.0, x1), max(0.0, y1), min(1.0, x2), min(1.0, y2)
    box = (int(x1 * img.width), int(y1 * img.height), int(x2 * img.width), int(y2 * img.height))
    if box[2] <= box[0] or box[3] <= box[1]:
        raise ImageError(f"box {list(bbox)} (0-1000 normalised) is empty in the {img.width}x{img.height} px image")
    with vips_errors("cannot crop image"):
        region = crop(img, box)
        w, h = region.width, region.height
        if w < REFERENCE_MIN_SIDE or h < REFERENCE_MIN_SIDE:
            region = resize(region, max(w, REFERENCE_MIN_SIDE), max(h, REFERENCE_MIN_SIDE))
        th, tw = smart_resize(region.height, region.width, factor=PNG_SMART_FACTOR,
                              min_pixels=PNG_SMART_MIN_PIXELS, max_pixels=PNG_SMART_MAX_PIXELS)
        out = resize(drop_alpha(region, background=(255, 255, 255)), tw, th)
        return EncodedImage("image/png", png_bytes(out), tw, th)


@register_tool
class ImageZoomInTool(Tool):
    """Crop a 0-1000 normalised box of an original image, upscaled for a closer look."""

    name: ClassVar[str] = "image_zoom_in_tool"
    option_schema: ClassVar[OptionSchema | None] = {}
    description: ClassVar[str] = (
        "Zoom in on a region of the image by cropping it with a bounding box. bbox_2d is "
        "[x1, y1, x2, y2] in coordinates normalised to 0-1000 (0,0 top-left, 1000,1000 "
        "bottom-right), whatever the image's pixel size. Returns the cropped region, enlarged."
    )
    parameters: ClassVar[dict[str, Any]] = _zoom_parameters("reference")

    def spec(self) -> dict[str, Any]:
        """Schema per instance: ``fidelity`` option "fixed" relaxes the required fields."""
        fidelity = str(self.options.get("fidelity", "reference"))
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _zoom_parameters(fidelity),
            },
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if not isinstance(args, dict):
            return ToolResult.fail(f"Invalid arguments: expected an object, got {type(args).__name__}")
        raw_bbox = args.get("bbox_2d", args.get("bbox"))
        if raw_bbox is None:
            return ToolResult.fail(
                "Invalid bbox format: missing bbox_2d, expected [x1, y1, x2, y2] in 0-1000"
            )
        try:
            bbox = parse_bbox(raw_bbox)
        except ImageError as e:
            return ToolResult.fail(f"Invalid bbox format: {e}")

        if ctx.fidelity == "reference":
            # VistaHop ignores img_idx and always crops the first image.
            if not ctx.images:
                return ToolResult.fail("No image is available in this task.")
            idx = 0
        else:
            found = _image_index(args, ctx)
            if isinstance(found, str):
                return ToolResult.fail(found)
            idx = found
        ref = ctx.images[idx]

        cropper = reference_crop if ctx.fidelity == "reference" else crop_original

        def work() -> tuple[ImageRef, int, int]:
            out = cropper(_read(ctx, ref), bbox)
            return ctx.blobs.put(out.data), out.width, out.height

        try:
            new_ref, w, h = await asyncio.to_thread(work)
        except ImageError as e:
            msg = str(e)
            if "box" in msg or "aspect ratio" in msg:
                return ToolResult.fail(f"Invalid bbox format: {msg}")
            return ToolResult.fail(f"Cannot read image {idx}: {msg}")
        except KeyError as e:
            return ToolResult.fail(f"Image {idx} is missing from the blob store: {e}")
        return ToolResult(
            status="ok",
            output=ZOOM_OUTPUT_TEXT,
            images=[new_ref],
            extra={"img_idx": idx, "bbox_2d": list(bbox), "size": [w, h], "label": args.get("label")},
        )


@register_tool
class RotateImageTool(Tool):
    """Rotate an original image by any angle (TIR-Bench's function-calling diagnostic).

    Angles are clockwise, the convention of TIR-Bench's rotation questions ("rotate the image
    clockwise by how many degrees"), so the option a model tests is the angle it passes.
    """

    name: ClassVar[str] = "rotate_image"
    option_schema: ClassVar[OptionSchema | None] = {}
    description: ClassVar[str] = (
        "Rotate the image clockwise by the given angle in degrees (any number; negative turns "
        "counter-clockwise). The canvas grows to fit the whole rotated image. Returns the rotated image."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "angle": {"type": "number", "description": "Degrees clockwise, e.g. 90, -45, 180."},
            "img_idx": {"type": "number", "description": "Index of the image to rotate (default 0)."},
        },
        "required": ["angle"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if not isinstance(args, dict):
            return ToolResult.fail(f"Invalid arguments: expected an object, got {type(args).__name__}")
        angle = args.get("angle")
        if isinstance(angle, str):
            try:
                angle = float(angle)
            except ValueError:
                pass
        if not real_number(angle):
            return ToolResult.fail(f"Invalid angle: expected a finite number of degrees, got {str(angle)[:40]}")
        found = _image_index(args, ctx)
        if isinstance(found, str):
            return ToolResult.fail(found)
        ref = ctx.images[found]
        deg = float(angle)

        def work() -> tuple[ImageRef, int, int]:
            out = rotate_original(_read(ctx, ref), -deg)  # rotate_original turns counter-clockwise
            return ctx.blobs.put(out.data), out.width, out.height

        try:
            new_ref, w, h = await asyncio.to_thread(work)
        except ImageError as e:
            return ToolResult.fail(f"Cannot rotate image {found}: {e}")
        except KeyError as e:
            return ToolResult.fail(f"Image {found} is missing from the blob store: {e}")
        return ToolResult(
            status="ok",
            output=f"Here is image {found} rotated {deg:g} degrees clockwise:",
            images=[new_ref],
            extra={"img_idx": found, "angle": deg, "size": [w, h]},
        )
