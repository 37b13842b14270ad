"""VistaHop report figures: Pass@1 over runs, L1/L2/L3, tool calls, rounds, utilisation, endings.

Definitions follow the paper: Pass@1 is the share of tasks whose first response is accepted,
computed per run (seed) and averaged over the runs (5 in the paper); utilisation is average
tool calls divided by the maximum allowed calls (one per round, so the round budget). Errored
records count 0 and stay in the denominator, as in the reference, and their number is reported
next to every figure. ``score_reference_file`` reads the public runner's ``results.jsonl``.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TERMINATION_STATES = ("AnswerSubmitted", "Error", "MaxRounds")

_TERMINATION_NAMES = {
    "answered": "AnswerSubmitted",
    "max_rounds": "MaxRounds",
    "error": "Error",
    "context_overflow": "Error",
    # The reference runner's finish_reason values.
    "no_tool_calls": "AnswerSubmitted",
    "stop": "AnswerSubmitted",
    "length": "AnswerSubmitted",
    "max_turns": "MaxRounds",
}

DEFAULT_MAX_ROUNDS = 10


def termination_state(value: str | None) -> str:
    """Paper name of an ending: AnswerSubmitted, Error or MaxRounds (unknown endings are errors)."""
    return _TERMINATION_NAMES.get(value or "error", "Error")


def passed(record: dict[str, Any]) -> bool:
    """Accepted: status ok and score > 0.5 (the reference's threshold)."""
    score = record.get("score")
    return record.get("status", "ok") == "ok" and score is not None and float(score) > 0.5


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1); std is 0.0 for a single run."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def _pass_over_runs(records: list[dict[str, Any]]) -> dict[str, Any]:
    by_seed: dict[Any, list[bool]] = defaultdict(list)
    for r in records:
        by_seed[r.get("seed", 0)].append(passed(r))
    per_run = {str(seed): 100.0 * sum(v) / len(v) for seed, v in sorted(by_seed.items(), key=lambda kv: str(kv[0]))}
    mean, std = mean_std(list(per_run.values()))
    tasks = {r.get("task_id") for r in records}
    return {"pass_at_1": mean, "std": std, "runs": len(per_run), "per_run": per_run, "n_tasks": len(tasks),
            "errors": sum(1 for r in records if r.get("status") == "error")}


def _trajectory_field(record: dict[str, Any], name: str) -> Any:
    traj = record.get("trajectory")
    if isinstance(traj, dict) and name in traj:
        return traj[name]
    return record.get(name)


def tool_call_count(record: dict[str, Any]) -> int:
    """Calls from the trajectory's call list, else the record's counter."""
    calls = _trajectory_field(record, "tool_calls")
    if isinstance(calls, list):
        return len(calls)
    return int(calls or 0)


def aggregate(records: list[dict[str, Any]], max_rounds: int | None = None) -> dict[str, Any]:
    """Figures for one model under one setting: Pass@1 ± std, levels, process statistics.

    ``max_rounds`` defaults to the record's ``max_rounds`` (top level or metadata), else 10.
    """
    if not records:
        return {"n_records": 0, "pass_at_1": 0.0, "std": 0.0, "runs": 0, "levels": {}, "errors": 0}
    budget = max_rounds or _budget(records)
    overall = _pass_over_runs(records)
    levels: dict[str, Any] = {}
    by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        level = (r.get("metadata") or {}).get("level")
        if level:
            by_level[str(level)].append(r)
    for level in sorted(by_level):
        levels[level] = _pass_over_runs(by_level[level])
    calls = [tool_call_count(r) for r in records]
    rounds = [int(_trajectory_field(r, "rounds") or 0) for r in records]
    avg_calls = sum(calls) / len(calls)
    endings = Counter(termination_state(_ending(r)) for r in records)
    tools = Counter(_tool_names(records))
    return {
        "n_records": len(records),
        **overall,
        "levels": levels,
        "avg_tool_calls": avg_calls,
        "avg_rounds": sum(rounds) / len(rounds),
        "max_rounds": budget,
        "utilisation": 100.0 * avg_calls / budget if budget else 0.0,
        "termination": {state: endings.get(state, 0) for state in TERMINATION_STATES},
        "calls_by_tool": dict(sorted(tools.items())),
        "error_kinds": dict(Counter(str(r.get("error_kind") or "unknown") for r in records
                                    if r.get("status") == "error")),
    }


def aggregate_by_setting(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``aggregate`` per (model, setting), keyed ``model/setting``: the rows of paper Table 3."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[f"{r.get('model', '?')}/{r.get('setting', '?')}"].append(r)
    return {key: aggregate(group) for key, group in sorted(groups.items())}


def _budget(records: list[dict[str, Any]]) -> int:
    for r in records:
        value = r.get("max_rounds") or (r.get("metadata") or {}).get("max_rounds")
        if value:
            return int(value)
    return DEFAULT_MAX_ROUNDS


def _ending(record: dict[str, Any]) -> str | None:
    if record.get("error_kind") == "load_error":
        # A dataset row that never ran: the engine leaves its (empty) trajectory at "answered".
        return "error"
    ending = _trajectory_field(record, "termination")
    if ending is None and record.get("status") == "error":
        return "error"
    return str(ending) if ending is not None else "answered"


def _tool_names(records: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in records:
        calls = _trajectory_field(r, "tool_calls")
        if isinstance(calls, list):
            names.extend(str(c.get("name")) for c in calls if isinstance(c, dict))
    return names


def score_reference_file(path: str | Path, levels: dict[str, str] | None = None) -> dict[str, Any]:
    """Score the public runner's ``results.jsonl``: per item, overall, per dataset, Pass@1 (%).

    ``levels`` (sample_id -> L1/L2/L3, e.g. from the loaded tasks) adds a by-level table. The
    score of an item is ``llm_score`` when present, else ``em_score_mcq``; > 0.5 passes.
    Errored rows count 0 and stay in the denominator, as the runner counts them.
    """
    items: dict[str, dict[str, Any]] = {}
    for line_no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {line_no} is not JSON ({e.msg})") from None
        sid = str(row.get("sample_id", f"line-{line_no}"))
        score = row.get("llm_score", row.get("em_score_mcq"))
        error = row.get("error") or None
        items[sid] = {  # a resumed run may repeat an id; the last row wins, as a re-run would
            "dataset": row.get("dataset", ""),
            "score": score,
            "passed": error is None and score is not None and float(score) > 0.5,
            "llm_score": row.get("llm_score"),
            "em_score_mcq": row.get("em_score_mcq"),
            "termination": termination_state(row.get("finish_reason")),
            "rounds": int(row.get("num_round") or 0),
            "error": error,
        }
    overall = _reference_stats(list(items.values()))
    by_category: dict[str, Any] = defaultdict(list)
    for item in items.values():
        by_category[item["dataset"]].append(item)
    result: dict[str, Any] = {
        "items": items,
        "overall": overall,
        "by_category": {name: _reference_stats(group) for name, group in sorted(by_category.items())},
        "pass_at_1": overall["pass_at_1"],
    }
    if levels:
        by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for sid, item in items.items():
            if sid in levels:
                by_level[levels[sid]].append(item)
        result["by_level"] = {lvl: _reference_stats(group) for lvl, group in sorted(by_level.items())}
    return result


def _reference_stats(items: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(items)
    correct = sum(1 for i in items if i["passed"])
    endings = Counter(i["termination"] for i in items)
    llm = [i for i in items if i["llm_score"] is not None]
    em = [i for i in items if i["em_score_mcq"] is not None]
    return {
        "total": n,
        "correct": correct,
        "errors": sum(1 for i in items if i["error"]),
        "pass_at_1": 100.0 * correct / n if n else 0.0,
        "llm_accuracy": sum(1 for i in llm if float(i["llm_score"]) > 0.5) / len(llm) if llm else None,
        "em_accuracy": sum(1 for i in em if float(i["em_score_mcq"]) > 0.5) / len(em) if em else None,
        "avg_rounds": sum(i["rounds"] for i in items) / n if n else 0.0,
        "termination": {state: endings.get(state, 0) for state in TERMINATION_STATES},
    }
