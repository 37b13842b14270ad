"""VisualToolBench metrics as pure functions over record dicts.

ARS and APR follow the official scorer (all turns' rubrics pooled, weight >= 4 is critical, the
data's ``critical`` flag ignored); the tool metrics, which the reference never implemented,
follow the paper's definitions. Error records are excluded from every mean and counted beside it.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from statistics import fmean, pstdev
from typing import Any

from .loader import domain_of

CRITICAL_WEIGHT = 4.0

VerdictRow = tuple[float, bool | None]
"""(weight, met): met None is a verdict that is neither Met nor Not Met (the reference's odd case)."""


def rubric_score(turns: Sequence[Sequence[VerdictRow]]) -> dict[str, Any]:
    """ARS, APR and per-turn ARS of one task from its verdicts, the official way.

    A verdict that is neither Met nor Not Met earns no weight but does not fail APR: that is
    what the reference's exact string comparison does.
    """
    met_w = total_w = 0.0
    passed = True
    per_turn: list[float | None] = []
    for turn in turns:
        t_met = t_total = 0.0
        for weight, met in turn:
            t_total += weight
            if met:
                t_met += weight
            elif met is False and weight >= CRITICAL_WEIGHT:
                passed = False
        per_turn.append(t_met / t_total if t_total else None)
        met_w += t_met
        total_w += t_total
    return {
        "ars": met_w / total_w if total_w else 0.0,
        "apr": 1.0 if passed else 0.0,
        "met_weight": met_w,
        "total_weight": total_w,
        "turn_ars": per_turn,
    }


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _group_table(records: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[_group_key(r, key)].append(r)
    return {name: _summary(rs) for name, rs in sorted(groups.items())}


def _group_key(record: dict[str, Any], key: str) -> str:
    meta = record.get("metadata") or {}
    if key == "domain":
        return str(meta.get("domain") or domain_of(str(meta.get("prompt_category", "unknown"))))
    return str(meta.get(key, "unknown"))


def _ok(record: dict[str, Any]) -> bool:
    details = record.get("score_details") or {}
    return record.get("status") == "ok" and "ars" in details and "apr" in details


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in records if _ok(r)]
    return {
        "n": len(ok),
        "errors": len(records) - len(ok),
        "apr": _mean([float(r["score_details"]["apr"]) for r in ok]),
        "ars": _mean([float(r["score_details"]["ars"]) for r in ok]),
    }


def _seed_spread(records: list[dict[str, Any]]) -> dict[str, Any]:
    by_seed: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if _ok(r):
            by_seed[int(r.get("seed", 0))].append(float(r["score_details"]["apr"]))
    apr = [fmean(v) for _, v in sorted(by_seed.items())]
    return {"seeds": len(apr), "apr_by_seed": apr, "apr_std": pstdev(apr) if len(apr) > 1 else 0.0}


def score_tables(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall APR/ARS and the paper's breakdowns (domain with STEM merged, eval focus, turn case)."""
    return {
        "overall": {**_summary(records), **_seed_spread(records)},
        "by_domain": _group_table(records, "domain"),
        "by_eval_focus": _group_table(records, "eval_focus"),
        "by_turncase": _group_table(records, "turncase"),
    }


# ---- tool use -------------------------------------------------------------------------------

def _calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    traj = record.get("trajectory") or {}
    return list(traj.get("tool_calls") or [])


def tool_metrics(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Proactivity (tasks with >= 1 call), success rate and volume, overall and per tool.

    Success is a call our tool marked ``ok`` (a schema-valid, non-empty result in the paper's
    words); volume is calls per task, counted over every scored task including tool-less ones.
    """
    runs = [r for r in records if r.get("status") == "ok"]
    per_tool: dict[str, list[bool]] = defaultdict(list)
    with_calls = 0
    for r in runs:
        calls = _calls(r)
        with_calls += bool(calls)
        for c in calls:
            per_tool[str(c.get("name"))].append(c.get("status") == "ok")
    total_calls = sum(len(v) for v in per_tool.values())
    n = len(runs)
    return {
        "tasks": n,
        "proactivity": with_calls / n if n else None,
        "success_rate": sum(sum(v) for v in per_tool.values()) / total_calls if total_calls else None,
        "volume": total_calls / n if n else None,
        "per_tool": {
            name: {
                "calls": len(v),
                "share": len(v) / total_calls,
                "success_rate": sum(v) / len(v),
                "volume": len(v) / n,
            }
            for name, v in sorted(per_tool.items())
        },
    }


IMAGE_OPS = ("crop", "resize", "rotate", "flip", "brightness", "contrast", "editing", "other")

# Model code is untrusted: every repeat that can fail is bounded (``[^)]{0,400}``, not ``[^)]*``), so
# a reply of "convertScaleAbs(" repeated costs linear time, not a minute per 200 KB.
_OP_PATTERNS: dict[str, re.Pattern[str]] = {
    "crop": re.compile(r"\.crop\s*\(|getRectSubPix|\bImageOps\.crop\b"),
    "resize": re.compile(
        r"\.resize\s*\(|\.thumbnail\s*\(|\bImageOps\.(?:fit|contain|pad|scale)\b|\bpyr(?:Up|Down)\b"
        r"|\bzoom\s*\(|\.reduce\s*\(|\brescale\s*\("
    ),
    "rotate": re.compile(
        r"\.rotate\s*\(|getRotationMatrix2D|\brot90\b|ROTATE_\d+|Transpose\.ROTATE|\bTRANSPOSE\b|\bTRANSVERSE\b"
    ),
    "flip": re.compile(r"\bImageOps\.(?:flip|mirror)\b|\bcv2\.flip\b|\bnp\.(?:flip|fliplr|flipud)\b|FLIP_(?:LEFT_RIGHT|TOP_BOTTOM)"),
    "brightness": re.compile(
        r"ImageEnhance\.Brightness|\bbrightness\b|\bgamma\b|convertScaleAbs\s*\([^)]{0,400}\bbeta\b|adjust_gamma|adjust_log",
        re.IGNORECASE,
    ),
    "contrast": re.compile(
        r"ImageEnhance\.Contrast|autocontrast|equalizeHist|ImageOps\.equalize|CLAHE|\bcontrast\b"
        r"|convertScaleAbs\s*\([^)]{0,400}\balpha\b|rescale_intensity|cv2\.normalize|NORM_MINMAX",
        re.IGNORECASE,
    ),
    "editing": re.compile(
        r"\bImageDraw\b|\.rectangle\s*\(|\.line\s*\(|\.circle\s*\(|\.ellipse\s*\(|\.polygon\s*\(|\.putText\s*\("
        r"|\.arrowedLine\s*\(|\.text\s*\(|\binpaint\b|\.paste\s*\(|\.annotate\s*\(|\.add_patch\s*\(|\bdrawContours\b"
        r"|\baddWeighted\b|\.alpha_composite\s*\("
    ),
    "other": re.compile(
        r"\bImageFilter\b|filter2D|GaussianBlur|medianBlur|bilateralFilter|\bblur\s*\(|Canny|\bthreshold\b"
        r"|cvtColor|\.convert\s*\(\s*['\"](?:L|1)['\"]|\bgrayscale\b|sharpen|UnsharpMask|morphologyEx|\bdilate\b"
        r"|\berode\b|Sobel|Laplacian|\bbitwise_|\binvert\b|ImageEnhance\.(?:Sharpness|Color)|\bposterize\b|\bsolarize\b"
    ),
}

_COMMENT = re.compile(r"#[^\n]*")
_SUBSCRIPT = re.compile(r"[\w)\]]\s*\[([^\[\]]*)\]")


def _slice_ops(code: str) -> set[str]:
    """Crops, flips and strided downsampling written as array slicing (``img[y0:y1, x0:x1]``)."""
    ops: set[str] = set()
    for m in _SUBSCRIPT.finditer(code):
        axes = [a.strip() for a in m.group(1).split(",")]
        if len(axes) < 2 or axes[0] in ("...", "Ellipsis") or not all(":" in a for a in axes[:2]):
            continue  # 1-D indexing, or channel selection such as BGR->RGB with [..., ::-1]
        for axis in axes[:2]:
            start, stop, *rest = (p.strip() for p in axis.split(":"))
            step = rest[0] if rest else ""
            if start or stop:
                ops.add("crop")
            if step == "-1":
                ops.add("flip")
            elif step not in ("", "1"):
                ops.add("resize")
    return ops


def classify_image_ops(code: str) -> set[str]:
    """The paper's image-operation categories found in one python_image_processing snippet.

    A call can hold several operations; a call that matches none of the named ones is "other".
    Comments are dropped first so "# crop the label" does not count as a crop.
    """
    code = _COMMENT.sub("", code)
    ops = {name for name, pat in _OP_PATTERNS.items() if pat.search(code)}
    ops |= _slice_ops(code)
    return ops or {"other"}


def _code_of(call: dict[str, Any]) -> str:
    args = call.get("args")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return args
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        return str(args["code"])
    return ""


def image_op_distribution(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts and shares of image operations over every python_image_processing call."""
    counts: Counter[str] = Counter()
    calls = 0
    for r in records:
        for c in _calls(r):
            if c.get("name") == "python_image_processing":
                calls += 1
                counts.update(classify_image_ops(_code_of(c)))
    total = sum(counts.values())
    return {
        "calls": calls,
        "counts": {op: counts.get(op, 0) for op in IMAGE_OPS},
        "shares": {op: (counts.get(op, 0) / total if total else 0.0) for op in IMAGE_OPS},
    }


def aggregate(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every VisualToolBench figure of one model/setting: score tables, tool use, image operations."""
    return {
        **score_tables(records),
        "tools": tool_metrics(records),
        "image_ops": image_op_distribution(records),
    }
