"""``score-file`` for TreeBench: VLMEvalKit's prediction file (rows + ``prediction``).

Items by ``index``, each ``{"score", "iou"}``; ``overall`` = Σ right / items, ``miou`` = mean
item IoU, ``by_category`` per Task/Subtask. ``scorer: treevgr`` applies TreeVGR's demo rules.
An empty prediction stops the file under VLMEvalKit's rule, as it stops VLMEvalKit.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fasteval.suites.mcq.matching import fixed_choice
from fasteval.suites.mcq.prediction_file import index_key, read_predictions
from fasteval.suites.mcq.tables import LETTERS, letter_options
from fasteval.suites.treebench.boxes import fixed_iou
from fasteval.suites.treebench.loader import parse_targets
from fasteval.suites.treebench.scoring import EMPTY_CRASH, reference_iou, reference_letter


def score_reference_file(path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
    scorer = str(options.get("scorer", "vlmevalkit"))
    convention = str(options.get("box_convention", "pixel"))
    items: dict[str, dict[str, float | None]] = {}
    by_cat: dict[str, list[float]] = defaultdict(list)
    for row in read_predictions(path):
        key = index_key(row)
        pred = row["prediction"]
        if row["was_empty"] and fidelity == "reference" and scorer == "vlmevalkit":
            raise ValueError(f"{path}: index {key}: {EMPTY_CRASH}")
        gold = str(row.get("answer", "")).strip()
        targets = [(b[0], b[1], b[2], b[3]) for b in parse_targets(row.get("target_instances"))]
        if fidelity == "reference":
            score, _ = reference_letter(scorer, pred, gold)
            box: float | None = reference_iou(scorer, pred, targets)
        else:
            opts = dict(zip(LETTERS, letter_options(row), strict=False))
            score = 1.0 if fixed_choice(pred, opts)[0] == gold else 0.0
            # A prediction file has no image sizes: normalised boxes need width/height options.
            box = fixed_iou(pred, targets, convention, int(options.get("width", 1000)),
                            int(options.get("height", 1000)))
        items[key] = {"score": score, "iou": box}
        by_cat[str(row.get("category", ""))].append(score)
    if not items:
        raise ValueError(f"{path}: no predictions")
    ious = [float(v["iou"]) for v in items.values() if v["iou"] is not None]
    return {"items": items, "overall": sum(float(v["score"] or 0) for v in items.values()) / len(items),
            "miou": sum(ious) / len(ious) if ious else None,
            "by_category": {k: sum(v) / len(v) for k, v in sorted(by_cat.items())}}
