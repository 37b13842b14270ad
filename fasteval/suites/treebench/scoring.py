"""TreeBench's reference letter and IoU rules, by scorer (VLMEvalKit or TreeVGR's demo)."""

from __future__ import annotations

from fasteval.core.tagged import Tagged
from fasteval.suites.mcq.matching import extract_characters_regex
from fasteval.suites.treebench.boxes import Box, treevgr_iou, vlmevalkit_iou

EMPTY_CRASH = "VLMEvalKit's TreeBench.evaluate raises TypeError on an empty prediction (one kills the whole run)"
BOX_INSTRUCTION = ("When your reasoning refers to an object, give its box in the original image's pixels as "
                   "<box>[x1,y1,x2,y2]</box>.")
_ANSWER = Tagged("<answer>", "</answer>")


def reference_letter(scorer: str, prediction: str, gold: str) -> tuple[float, str]:
    """(score, letter read) by VLMEvalKit's or TreeVGR's rule."""
    tag = _ANSWER.first(prediction)
    pred = tag.strip().upper() if tag is not None else prediction
    if scorer == "treevgr":
        return (1.0 if pred.upper() == gold.upper() else 0.0), pred
    letter = extract_characters_regex(pred)
    return (1.0 if letter and letter == gold else 0.0), letter


def reference_iou(scorer: str, prediction: str, targets: list[Box]) -> float:
    return treevgr_iou(prediction, targets) if scorer == "treevgr" else vlmevalkit_iou(prediction, targets)
