"""``score-file`` for MME-RealWorld: the official script's result file or VLMEvalKit's predictions.

- ``scorer: official`` (default): the JSON / JSONL result file the repository's
  ``eval_your_results.py`` reads: the release objects plus ``Output`` (``output`` as the LLaVA
  script writes it is read too). Items by ``Question_id``; ``e_choices`` counts the E answers.
- ``scorer: vlmevalkit``: the prediction file (rows + ``prediction``), items by ``index``, Task
  and Subtask from ``category``, the fine category from ``l2-category``. An empty prediction is
  an error for the whole file, as it is for VLMEvalKit.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fasteval.suites.mcq.matching import fixed_choice
from fasteval.suites.mcq.prediction_file import index_key, read_predictions
from fasteval.suites.mcq.tables import LETTERS, iter_rows, letter_options
from fasteval.suites.mme_realworld.loader import fine_category, parse_choices
from fasteval.suites.mme_realworld.scoring import EMPTY_CRASH, official_letter, vlmevalkit_letter

# The official script's results dict is built from these two fixed lists; any other value is a KeyError.
TASKS = ("Perception", "Reasoning")
SUBTASKS = ("Monitoring", "Autonomous_Driving", "OCR with Complex Context", "Diagram and Table", "Remote Sensing")


def _mean(v: list[float]) -> float:
    return sum(v) / len(v)


def _tables(rows: list[tuple[str, float, str, str, str, str | None]]) -> dict[str, Any]:
    if not rows:
        raise ValueError("the file holds no items")
    by_task: dict[str, list[float]] = defaultdict(list)
    by_sub: dict[str, list[float]] = defaultdict(list)
    by_fine: dict[str, list[float]] = defaultdict(list)
    # The official script prints an "E choice" count for every task and every task/subtask of its
    # fixed lists, 0 included (even for a subtask with no items): so do we.
    e_count: dict[str, int] = defaultdict(int, {k: 0 for t in TASKS for k in (t, *(f"{t}/{s}" for s in SUBTASKS))})
    for _, hit, task, sub, fine, letter in rows:
        by_task[task].append(hit)
        by_sub[f"{task}/{sub}"].append(hit)
        by_fine[f"{task}/{sub}/{fine}"].append(hit)
        if letter == "E":
            e_count[task] += 1
            e_count[f"{task}/{sub}"] += 1
    return {"items": {k: h for k, h, *_ in rows}, "overall": _mean([h for _, h, *_ in rows]),
            "by_task": {k: _mean(v) for k, v in sorted(by_task.items())},
            "by_category": {k: _mean(v) for k, v in sorted(by_sub.items())},
            "by_subcategory": {k: _mean(v) for k, v in sorted(by_fine.items())},
            "e_choices": dict(sorted(e_count.items()))}


def score_reference_file(path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
    scorer = str(options.get("scorer", "official"))
    rows: list[tuple[str, float, str, str, str, str | None]] = []
    if scorer == "official":
        for n, item in enumerate(iter_rows(path)):
            if "__bad__" in item:
                raise ValueError(f"{path}: {item['__bad__']}")
            output = item.get("Output", item.get("output"))
            if not isinstance(output, str):
                raise ValueError(f"{path}: item {n} has no 'Output' text")
            choices = parse_choices(item.get("Answer choices"))
            opts = {LETTERS[i]: c[4:] for i, c in enumerate(choices)}
            gold = str(item.get("Ground truth", "")).strip()
            if fidelity == "reference" and (item.get("Task") not in TASKS or item.get("Subtask") not in SUBTASKS):
                raise ValueError(f"{path}: item {n}: Task {item.get('Task')!r} / Subtask {item.get('Subtask')!r} is "
                                 "outside the official script's lists (it raises KeyError there)")
            letter = official_letter(output, opts) if fidelity == "reference" else fixed_choice(output, opts)[0]
            rows.append((str(item.get("Question_id", n)), 1.0 if letter == gold else 0.0, str(item.get("Task")),
                         str(item.get("Subtask")), fine_category(str(item.get("Category", ""))), letter))
        out = _tables(rows)
        return out
    if scorer != "vlmevalkit":
        raise ValueError(f"mme-realworld score-file: scorer must be official or vlmevalkit, got {scorer!r}")
    for row in read_predictions(path):
        key = index_key(row)
        if row["was_empty"] and fidelity == "reference":
            raise ValueError(f"{path}: index {key}: {EMPTY_CRASH}")
        opts = dict(zip(LETTERS, letter_options(row), strict=False))
        pred = row["prediction"]
        letter = vlmevalkit_letter(pred) if fidelity == "reference" else fixed_choice(pred, opts)[0]
        gold = str(row.get("answer", "")).strip()
        task, _, sub = str(row.get("category", "")).partition("/")
        rows.append((key, 1.0 if letter and letter == gold else 0.0, task, sub.split("/")[0],
                     fine_category(str(row.get("l2-category", ""))), letter))
    out = _tables(rows)
    del out["e_choices"]
    return out
