"""Mini-o3's ``<grounding>`` protocol (``verl/workers/rollout/vllm_rollout/vllm_async_engine.py``).

The model writes ``<grounding>{"bbox_2d": [x0, y0, x1, y1], "source": "original_image"}</grounding>``
with coordinates relative to the source image (0-1; README: ``use_relative_coordinates=True``).
``source`` is ``original_image`` or ``observation_i``: the harness keeps a list of observations,
the original image first (so ``observation_0`` is the original too), then each crop at the
source's full resolution (the crop is never resized before it is stored). Generation stops at
``</grounding>``; the harness reads the call with one regex (exact spacing: ``{"bbox_2d": `` …
``, "source": "…"}``), ``eval``s the box, scales it by the source's size, truncates to int,
clamps to ``[0, w-1] x [0, h-1]``, refuses an empty box or an aspect ratio of 200 or more, crops,
and shows the crop resized to 3,136..12,845,056 pixels (nearest neighbour) in a user turn
"After the above Action {t}, … (Observation {t+1})" with the image where the text holds the
vision placeholder. An error is shown to the model with the error prompt and the episode goes on.
A reply without a grounding ends it. Validation: 12 rounds, 12 images.

Quirk kept under ``fidelity: reference``: the label "Observation {t+1}" counts rounds, while the
list counts successful crops, so after a failed grounding the label names an index the list does
not have. Under ``fixed`` the label is the observation's real index, the box is read from any JSON
spacing, and pixel edges are floored/ceiled within the image.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from fasteval.core.tagged import Tagged
from fasteval.core.types import ImageRef, Message, ToolCall
from fasteval.images import ImageError, decode, drop_alpha, pixel_box, png_bytes, real_number
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

GROUNDING = Tagged("<grounding>", "</grounding>")
OBSERVATION = re.compile(r"observation_([0-9]*)")
VISION_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
"""Where Mini-o3's observation prompt puts the crop (Qwen2.5-VL's image tokens)."""
MAX_PIXELS = 12_845_056
MIN_PIXELS = 3_136
MIN_SIDE = 28
MAX_RATIO = 200
ROUNDS = 12
"""``val_max_generation_round`` in Mini-o3's README."""


@dataclass(frozen=True, slots=True)
class MiniO3Texts:
    """The harness's texts, bound by the suite: the system prompt, the observation turn (action
    and observation numbers in) and the error turn (the error text in)."""

    system: str
    observation: Callable[[int, int], str]
    error: Callable[[str], str]


_CALL_HEAD, _SOURCE, _CALL_TAIL, _QUOTES = '<grounding>{"bbox_2d": ', '"source": ', "}</grounding>", "',\""


def reference_call(kept: str) -> tuple[str, str] | None:
    """(box text, source) as the harness's regex reads them from a reply cut at its first
    ``</grounding>``, or None where that regex does not match.

    The harness matches ``.*<grounding>{"bbox_2d": (.*),.*"source": [',"](.*)[',"]}</grounding>``
    (DOTALL). Run as a regex that is cubic on a reply of many ``<grounding>{"bbox_2d": `` and
    commas (a 10 KB reply: minutes); this finds the same groups with a few reverse searches:
    every greedy part takes the last place the rest still fits, so the source is the last
    ``"source": <quote>`` before the closing quote, the box ends at the last comma before it,
    and begins after the last call head before that comma."""
    end = len(kept) - len(_CALL_TAIL) - 1
    if end < 0 or not kept.endswith(_CALL_TAIL) or kept[end] not in _QUOTES:
        return None
    source = kept.rfind(_SOURCE, 0, end - 1)  # its quote must come before the closing one
    while source >= 0 and kept[source + len(_SOURCE)] not in _QUOTES:
        source = kept.rfind(_SOURCE, 0, source + len(_SOURCE) - 1)
    if source < 0:
        return None
    comma = kept.rfind(",", 0, source)
    head = kept.rfind(_CALL_HEAD, 0, comma) if comma >= 0 else -1
    if head < 0:
        return None
    return kept[head + len(_CALL_HEAD):comma], kept[source + len(_SOURCE) + 1:end]


def _view_size(w: int, h: int) -> tuple[int, int]:
    """Mini-o3's ``process_image`` sizes for a crop shown to the model (each step on the last)."""
    if w * h > MAX_PIXELS:
        f = math.sqrt(MAX_PIXELS / (w * h))
        w, h = int(w * f), int(h * f)
    if w * h < MIN_PIXELS:
        f = math.sqrt(MIN_PIXELS / (w * h))
        w, h = int(w * f), int(h * f)
    if w < MIN_SIDE or h < MIN_SIDE:
        f = MIN_SIDE / min(w, h)
        w, h = int(w * f + 1), int(h * f + 1)
    if w / h >= MAX_RATIO:
        h = int(w / 190 + 1)
    if h / w >= MAX_RATIO:
        w = int(h / 190 + 1)
    return w, h


def _source_index(source: Any, fidelity: str) -> int:
    if not isinstance(source, str):
        raise ValueError(f"'source' must be a string, got {bounded(repr(source), 40)}")
    if source == "original_image":
        return 0
    m = OBSERVATION.fullmatch(source) if fidelity == "fixed" else OBSERVATION.match(source)
    if m is None or not m.group(1):
        raise ValueError(f"the 'source' argument {bounded(source, 60)!r} does not match 'observation_<i>'")
    return int(m.group(1))


def _box(bbox: Any, w: int, h: int, fidelity: str) -> tuple[int, int, int, int]:
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(real_number(v, MAX_COORDINATE) for v in bbox):
        raise ValueError(f"'bbox_2d' must be a list of 4 numbers, got {bounded(str(bbox)[:200], 80)}")
    x0, y0, x1, y1 = bbox[0] * w, bbox[1] * h, bbox[2] * w, bbox[3] * h
    if fidelity == "fixed":
        if not (x0 < x1 and y0 < y1):
            raise ValueError(f"the box {bbox} is empty: x0 < x1 and y0 < y1 are needed")
        try:
            left, top, right, bottom = pixel_box((x0, y0, x1, y1), w, h)
        except ImageError as e:
            raise ValueError(str(e)) from None
    else:
        left, top = max(int(x0), 0), max(int(y0), 0)
        right, bottom = min(int(x1), w - 1), min(int(y1), h - 1)
        if not (left <= right - 1 and top <= bottom - 1):
            raise ValueError(f"the bounding box is not valid: {[left, top, right, bottom]}")
    bw, bh = right - left, bottom - top
    if bw / bh >= MAX_RATIO or bh / bw >= MAX_RATIO:
        raise ValueError(f"the aspect ratio of the box exceeds {MAX_RATIO}")
    return left, top, right, bottom


class MiniO3Grounding(Tool):
    """Crop a relative box of the original image or of an earlier observation (this job's)."""

    name: ClassVar[str] = "grounding"
    description: ClassVar[str] = "Zoom into a 0-1 relative box of original_image or observation_i."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"bbox_2d": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
                       "source": {"type": "string"}},
        "required": ["bbox_2d", "source"],
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.crops: list[ImageRef] = []
        """Observations 1.. at their source's full resolution (observation 0 is the original)."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if not ctx.images:
            return ToolResult.fail("No image is available in this task.")
        try:
            idx = _source_index(args.get("source"), ctx.fidelity)
        except ValueError as e:
            return ToolResult.fail(str(e))
        observations = [ctx.images[0], *self.crops]
        if idx >= len(observations):
            return ToolResult.fail(f"there is no observation {idx}: the source must be original_image or "
                                   f"observation_0..observation_{len(observations) - 1}")
        source, bbox, fidelity = observations[idx], args.get("bbox_2d"), ctx.fidelity

        def work() -> tuple[ImageRef, ImageRef, list[int], list[int]]:
            img = drop_alpha(decode(ctx.blobs.get(source)), background=(255, 255, 255))
            left, top, right, bottom = _box(bbox, img.width, img.height, fidelity)
            with vips_errors("cannot crop image"):
                data = png_bytes(img.crop(left, top, right - left, bottom - top))
                raw, (cw, ch) = ctx.blobs.put(data), (right - left, bottom - top)
                vw, vh = _view_size(cw, ch)
                if (vw, vh) == (cw, ch):
                    return raw, raw, [left, top, right, bottom], [vw, vh]
                # the source was decoded for one pass: the view is made from the stored crop
                view = decode(data).resize(vw / cw, vscale=vh / ch, kernel="nearest")
                return raw, ctx.blobs.put(png_bytes(view)), [left, top, right, bottom], [view.width, view.height]

        try:
            raw, shown, box, size = await asyncio.to_thread(work)
        except (ValueError, ImageError) as e:
            return ToolResult.fail(str(e))
        self.crops.append(raw)
        return ToolResult(status="ok", output="", images=[shown],
                          extra={"source": idx, "box": box, "size": size, "observation": raw,
                                 "observation_index": len(self.crops)})


class MiniO3Protocol(TextProtocol):
    """``protocol: mini-o3-grounding``: Mini-o3's multi-turn zoom on original or observed images."""

    name: ClassVar[str] = "mini-o3-grounding"
    tool_name: ClassVar[str] = MiniO3Grounding.name

    def __init__(self, fidelity: str, texts: MiniO3Texts) -> None:
        super().__init__(fidelity, texts.system)
        self.texts = texts
        self.tool = MiniO3Grounding()

    def tools(self) -> dict[str, Tool]:
        return {self.tool_name: self.tool}

    def parse(self, content: str) -> ParsedTurn:
        found = next(GROUNDING.spans(content), None)
        if found is None:
            return ParsedTurn(content)
        kept, raw = content[:found[3]], content[found[1]:found[2]]  # the harness stops generation at </grounding>
        try:
            if self.fidelity == "reference":
                call = reference_call(kept)
                if call is None:
                    raise ValueError('write it as <grounding>{"bbox_2d": [x0, y0, x1, y1], '
                                     '"source": "original_image"}</grounding>')
                args: Any = {"bbox_2d": read_call_object(call[0]), "source": call[1]}
            else:
                args = read_call_object(raw.strip())
                if not isinstance(args, dict) or "bbox_2d" not in args or "source" not in args:
                    raise ValueError('the grounding must be a JSON object with "bbox_2d" and "source"')
                args = {"bbox_2d": args["bbox_2d"], "source": args["source"]}
            orjson.dumps(args)
        except (ValueError, TypeError, orjson.JSONEncodeError) as e:
            return ParsedTurn(kept, rejected=bounded(f"could not read the grounding: {e}"),
                              raw_call=bounded(raw))
        return ParsedTurn(kept, [call_request(self.tool_name, args)])

    def result_messages(self, call: ToolCall, result: ToolResult) -> list[Message]:
        if result.status != "ok":
            return [{"role": "user", "content": [{"type": "text", "text": self.texts.error(bounded(result.output))}]}]
        action = call.round - 1  # the harness's 0-based iteration
        observation = call.round if self.fidelity == "reference" else int(result.extra["observation_index"])
        text = self.texts.observation(action, observation)
        before, sep, after = text.partition(VISION_PLACEHOLDER)
        parts: list[dict[str, Any]] = [{"type": "text", "text": before}] if before else []
        parts += [{"type": "image", "image": ref} for ref in result.images]
        if sep and after:
            parts.append({"type": "text", "text": after})
        elif not sep:
            parts = [{"type": "text", "text": text}] + [{"type": "image", "image": ref} for ref in result.images]
        return [{"role": "user", "content": parts}]
