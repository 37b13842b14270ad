"""TreeBench's box evidence: the two reference readings and ours.

Reference (VLMEvalKit ``TreeBench.evaluate``, §4.3): boxes come from ``<box>…</box>`` inside the
first ``<think>`` block (the whole reply when there is none) and count only when the content
*starts with* ``[int,int,int,int]`` with no spaces; a box needs x1 < x2 and y1 < y2. The item's
IoU is the mean over targets of the best IoU against any kept box; with no targets it is 1 when
any box was kept. TreeVGR's demo scorer uses the same regex on the whole reply, and 0 with no
targets.

Ours: every ``<box>`` of the reply, any four numbers inside it (spaces, floats, a
``{"bbox_2d": [...]}`` object, parentheses), corners in either order, converted to original-image
pixels by the model's convention (``pixel``, ``norm1000``, ``norm1``, or ``auto``: all values ≤ 1
read as 0-1, else pixels). An item without targets has no IoU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fasteval.core.tagged import Tagged

Box = tuple[float, float, float, float]
CONVENTIONS = ("auto", "pixel", "norm1000", "norm1")

_THINK = Tagged("<think>", "</think>")
_BOX = Tagged("<box>", "</box>")
_STRICT = re.compile(r"\[(\d+),(\d+),(\d+),(\d+)\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def iou(a: Box, b: Box) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def mean_best_iou(targets: Sequence[Box], boxes: Sequence[Box]) -> float:
    return sum(max(iou(t, b) for b in boxes) for t in targets) / len(targets)


def strict_boxes(text: str) -> list[Box]:
    out: list[Box] = []
    for content in _BOX.all(text):
        m = _STRICT.match(content.strip())
        if m:
            x1, y1, x2, y2 = (float(g) for g in m.groups())
            if x1 < x2 and y1 < y2:
                out.append((x1, y1, x2, y2))
    return out


def vlmevalkit_iou(prediction: str, targets: Sequence[Box]) -> float:
    think = _THINK.first(prediction)
    cot = think.strip() if think is not None else prediction
    boxes = strict_boxes(cot)
    if not boxes:
        return 0.0
    if not targets:
        return 1.0
    return mean_best_iou(targets, boxes)


def treevgr_iou(prediction: str, targets: Sequence[Box]) -> float:
    boxes = strict_boxes(prediction)
    if not targets or not boxes:
        return 0.0
    return mean_best_iou(targets, boxes)


def _to_pixels(values: list[float], convention: str, width: int, height: int) -> Box | None:
    if convention == "auto":
        convention = "norm1" if all(0.0 <= v <= 1.0 for v in values) else "pixel"
    sx, sy = {"pixel": (1.0, 1.0), "norm1000": (width / 1000, height / 1000), "norm1": (width, height)}[convention]
    x1, y1, x2, y2 = values[0] * sx, values[1] * sy, values[2] * sx, values[3] * sy
    box = (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))
    return box if box[0] < box[2] and box[1] < box[3] else None


def lenient_boxes(text: str, convention: str, width: int, height: int) -> list[Box]:
    out: list[Box] = []
    for content in _BOX.all(text):
        numbers = [float(x) for x in _NUMBER.findall(content)]
        for i in range(0, len(numbers) - 3, 4):
            box = _to_pixels(numbers[i:i + 4], convention, width, height)
            if box is not None:
                out.append(box)
    return out


def fixed_iou(prediction: str, targets: Sequence[Box], convention: str, width: int, height: int) -> float | None:
    if not targets:
        return None
    boxes = lenient_boxes(prediction, convention, width, height)
    return mean_best_iou(targets, boxes) if boxes else 0.0
