"""DeepEyes' V* harness protocol (``eval/eval_vstar.py``): ``<tool_call>`` text, crops of the original.

The system prompt declares ``image_zoom_in_tool``; the model writes
``<tool_call>{"name": ..., "arguments": {"bbox_2d": [x1, y1, x2, y2], ...}}</tool_call>``. The
harness reads the text between the first ``<tool_call>`` and the next ``</tool_call>`` (to the
end when there is no closing tag), ignores the name, crops the ORIGINAL image at those pixel
coordinates (PIL: edges rounded, area outside the image black), resizes the crop with Qwen's
``smart_resize`` (factor 28, 4·28²..16384·28² pixels, bicubic) and sends it back as a user turn
``<tool_response>`` crop, its instruction text, ``</tool_response>``. A reply holding
``</answer>`` ends the episode; so does any error (their ``eval`` of the call text or the crop
raises, the loop breaks and the whole last reply is the prediction) — under ``fidelity:
reference``. Under ``fixed`` an unreadable call or a bad box is shown to the model as an error
and the episode goes on; the box is clamped to the image instead of padded with black.

We read the call with JSON, then ``ast.literal_eval`` (their ``eval`` accepts Python literals);
nothing the model writes is ever run.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from fasteval.core.types import ImageRef, Message, ToolCall
from fasteval.images import (
    ImageError,
    decode,
    drop_alpha,
    parse_bbox,
    pixel_box,
    png_bytes,
    real_number,
    smart_resize,
)
from fasteval.images.decode import vips_errors
from fasteval.images.ops import MAX_COORDINATE
from fasteval.tools.base import Tool, ToolContext, ToolResult
from fasteval.tools.text_protocols.base import (
    ParsedTurn,
    TextProtocol,
    bounded,
    call_request,
    read_call_object,
)

START, END = "<tool_call>", "</tool_call>"
RESPONSE_START, RESPONSE_END = "<tool_response>", "</tool_response>"
FACTOR = 28
MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_CROP_SCALE = 2
"""A box may cover at most this many times the image's pixels (the rest is black padding)."""


@dataclass(frozen=True, slots=True)
class DeepEyesTexts:
    """The harness's texts (read by the suite from the checkout): the system prompt, and the
    instruction repeated inside each ``<tool_response>`` after the crop."""

    system: str
    feedback: str


def _numbers(value: Any, what: str) -> list[float | int]:
    if not isinstance(value, list | tuple) or len(value) != 4:
        raise ValueError(f"{what} must be a list of 4 numbers [x1, y1, x2, y2], got {bounded(repr(value), 80)}")
    out: list[float | int] = []
    for v in value:
        if not real_number(v, MAX_COORDINATE):
            raise ValueError(f"{what} must hold 4 numbers within ±{MAX_COORDINATE:,}, got {bounded(str(v)[:80], 40)}")
        out.append(v)
    return out


def zoom_arguments(obj: Any, *, lenient: bool = False) -> dict[str, Any]:
    """``obj["arguments"]["bbox_2d"]`` (and the optional label) as the harness reads them;
    ``lenient`` (fixed) also takes the arguments as a JSON string, as some models write them."""
    if not isinstance(obj, dict):
        raise ValueError(f"the call must be a JSON object, got {type(obj).__name__}")
    args = obj.get("arguments")
    if lenient and isinstance(args, str):
        args = read_call_object(args)
    if not isinstance(args, dict):
        raise ValueError('the call has no "arguments" object')
    if "bbox_2d" not in args:
        raise ValueError('"arguments" has no "bbox_2d"')
    out: dict[str, Any] = {"bbox_2d": _numbers(args["bbox_2d"], "bbox_2d")}
    if isinstance(args.get("label"), str):
        out["label"] = args["label"][:200]
    return out


def _resize_cubic(img: Any, width: int, height: int) -> Any:
    if (width, height) == (img.width, img.height):
        return img
    return img.resize(width / img.width, vscale=height / img.height, kernel="cubic")


def deepeyes_crop(data: bytes, bbox: Sequence[float], *, clamp: bool) -> tuple[bytes, int, int]:
    """The crop the harness sends back: PNG bytes and its size.

    ``clamp`` False is DeepEyes' PIL crop (edges rounded, outside black); True keeps the box
    inside the image (our fixed reading) and refuses an empty one.
    """
    img = drop_alpha(decode(data), background=(255, 255, 255))
    if clamp:
        left, top, right, bottom = pixel_box(parse_bbox(list(bbox)), img.width, img.height)
    else:
        left, top, right, bottom = (round(v) for v in bbox)
        if right < left or bottom < top:
            raise ImageError(f"box {list(bbox)}: right/bottom is less than left/top")
    w, h = right - left, bottom - top
    if w <= 0 or h <= 0:
        raise ImageError(f"box {list(bbox)} is empty ({w}x{h} px)")
    # The reference pads a box past the image with black, so its cost follows the box, not the
    # image: 60000x60000 was 9 s of CPU per call. No box we can show is larger than the image
    # itself (or the largest crop the harness sends back), so twice that is refused.
    if w * h > max(MAX_CROP_SCALE * img.width * img.height, MAX_PIXELS):
        raise ImageError(f"box {list(bbox)} is {w}x{h} px, more than {MAX_CROP_SCALE} times the image "
                         f"({img.width}x{img.height}); zoom into a part of the image")
    # The harness passes (width, height) where smart_resize takes (height, width), and unpacks the
    # result swapped again: the net effect is each side rounded on its own, as here. They size
    # the crop from the box as written (before PIL rounds it).
    box_w, box_h = (w, h) if clamp else (bbox[2] - bbox[0], bbox[3] - bbox[1])
    # (ops.smart_resize is typed for whole pixels but computes in floats, as qwen_vl_utils does)
    new_w, new_h = smart_resize(cast(int, box_w), cast(int, box_h), factor=FACTOR, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                max_ratio=math.inf)
    with vips_errors("cannot crop image"):
        region = img.embed(-left, -top, w, h, extend="black") if not clamp else img.crop(left, top, w, h)
        out = _resize_cubic(region, new_w, new_h)
        return png_bytes(out), out.width, out.height


class DeepEyesZoom(Tool):
    """DeepEyes' ``image_zoom_in_tool``: a pixel box of the original image, enlarged."""

    name: ClassVar[str] = "image_zoom_in_tool"
    description: ClassVar[str] = "Crop a pixel box [x1, y1, x2, y2] of the original image and enlarge it."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"bbox_2d": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
                       "label": {"type": "string"}},
        "required": ["bbox_2d"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if not ctx.images:
            return ToolResult.fail("No image is available in this task.")
        try:
            bbox = _numbers(args.get("bbox_2d"), "bbox_2d")
        except ValueError as e:
            return ToolResult.fail(f"Invalid bbox: {e}")
        ref: ImageRef = ctx.images[0]
        clamp = ctx.fidelity != "reference"

        def work() -> tuple[ImageRef, int, int]:
            data, w, h = deepeyes_crop(ctx.blobs.get(ref), bbox, clamp=clamp)
            return ctx.blobs.put(data), w, h

        try:
            new_ref, w, h = await asyncio.to_thread(work)
        except ImageError as e:
            return ToolResult.fail(f"Invalid bbox: {e}")
        return ToolResult(status="ok", output="", images=[new_ref],
                          extra={"bbox_2d": bbox, "size": [w, h], "label": args.get("label")})


class DeepEyesProtocol(TextProtocol):
    """``protocol: deepeyes-text``: DeepEyes' V* loop (one call per reply, on the original image)."""

    name: ClassVar[str] = "deepeyes-text"
    tool_name: ClassVar[str] = DeepEyesZoom.name

    def __init__(self, fidelity: str, texts: DeepEyesTexts) -> None:
        super().__init__(fidelity, texts.system)
        self.texts = texts

    def tools(self) -> dict[str, Tool]:
        return {self.tool_name: DeepEyesZoom()}

    def parse(self, content: str) -> ParsedTurn:
        if "</answer>" in content or START not in content:
            return ParsedTurn(content)
        raw = content.split(START, 1)[1].split(END, 1)[0].strip()
        try:
            args = zoom_arguments(read_call_object(raw), lenient=self.fidelity == "fixed")
        except ValueError as e:
            return ParsedTurn(content, rejected=bounded(f"could not read the {START}: {e}"), raw_call=bounded(raw))
        return ParsedTurn(content, [call_request(self.tool_name, args)])

    def result_messages(self, call: ToolCall, result: ToolResult) -> list[Message]:
        parts: list[dict[str, Any]] = [{"type": "text", "text": RESPONSE_START}]
        if result.status == "ok":
            parts += [{"type": "image", "image": ref} for ref in result.images]
        else:
            parts.append({"type": "text", "text": f"Error: {bounded(result.output)}"})
        parts += [{"type": "text", "text": self.texts.feedback}, {"type": "text", "text": RESPONSE_END}]
        return [{"role": "user", "content": parts}]

    def ends_turn(self, call: ToolCall) -> bool:
        # Their loop sits in one try block: an unreadable call or a failed crop ends the episode.
        return call.status == "error" and self.fidelity == "reference"
