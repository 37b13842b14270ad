"""``score-file`` for V*: VLMEvalKit's prediction file or lmms-eval's logged samples.

Items are keyed by VLMEvalKit's ``index`` or lmms-eval's ``doc_id``; ``overall`` is the micro
mean over the file's questions, ``by_category`` the mean within each category. A file cannot
call a judge, so VLMEvalKit's rule runs with ``exact_matching`` (its unmatched replies are Z).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fasteval.suites.mcq.judge import EXACT_MATCHING
from fasteval.suites.mcq.matching import MatcherVersion, can_infer, fixed_choice, lmms_eval_letter
from fasteval.suites.mcq.prediction_file import first_text, index_key, read_lmms_samples, read_predictions
from fasteval.suites.mcq.tables import letter_options
from fasteval.suites.vstar.option_scan import find_options

# How lmms-eval's vstar_doc_to_text reads the "(A) text" options out of ``text`` (§1.2).


def _letter(pred: str, choices: dict[str, str], fidelity: str, scorer: str, version: MatcherVersion) -> str | None:
    if fidelity == "fixed":
        return fixed_choice(pred, choices)[0]
    if scorer == "lmms-eval":
        return lmms_eval_letter(pred)
    return can_infer(pred, choices, version) or "Z"


def _summary(items: dict[str, float], cats: dict[str, str]) -> dict[str, Any]:
    if not items:
        raise ValueError("the file holds no predictions")
    by: dict[str, list[float]] = defaultdict(list)
    for k, v in items.items():
        by[cats[k]].append(v)
    return {"items": items, "overall": sum(items.values()) / len(items),
            "by_category": {c: sum(v) / len(v) for c, v in sorted(by.items())}}


def score_reference_file(path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
    scorer = str(options.get("scorer", "vlmevalkit"))
    judge = str(options.get("judge", EXACT_MATCHING))
    if judge != EXACT_MATCHING:
        raise ValueError("score-file calls no model: use judge exact_matching (or rescore a run for the judge)")
    version: MatcherVersion = options.get("matcher", "upstream")
    items: dict[str, float] = {}
    cats: dict[str, str] = {}
    if scorer == "lmms-eval":
        for row in read_lmms_samples(path):
            raw_doc = row.get("doc")
            doc: dict[str, Any] = raw_doc if isinstance(raw_doc, dict) else {}
            key = str(row.get("doc_id"))
            label = str(row.get("target") or doc.get("label") or "").strip().upper()
            pred = first_text(row.get("filtered_resps")) or first_text(row.get("resps"))
            choices = dict(find_options(str(doc.get("text", ""))))
            items[key] = 1.0 if _letter(pred, choices, fidelity, scorer, version) == label and label else 0.0
            cats[key] = str(doc.get("category", "unknown"))
        return _summary(items, cats)
    for row in read_predictions(path):
        key = index_key(row)
        choices = dict(zip("ABCDEFGHIJ", letter_options(row), strict=False))
        pred = "nan" if row["was_empty"] and fidelity == "reference" else row["prediction"]
        gold = str(row.get("answer", "")).strip()
        items[key] = 1.0 if _letter(pred, choices, fidelity, scorer, version) == gold else 0.0
        cats[key] = str(row.get("category", "unknown"))
    return _summary(items, cats)
