"""Loader for TreeBench (HF ``HaochenWang/TreeBench``, ``TreeBench.tsv``): base64 SA-1B images.

Columns: ``index``, ``question``, ``multi-choice options``, ``A``-``D``, ``answer``,
``category`` ("Task/Subtask"), ``target_instances`` (a Python list literal of [x1, y1, x2, y2]
boxes in original-image pixels; may be empty), optional ``hint``. The image size is read from
its header only (for converting normalised boxes), never by decoding the pixels.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.core.types import Task, Turn
from fasteval.images.decode import ImageError, probe
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.mcq.tables import LETTERS, ImageColumn, RowError, iter_rows, letter_options, text_field

DATASET_FILE = "TreeBench.tsv"


def parse_targets(value: Any) -> list[list[float]]:
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return []
    try:
        boxes = ast.literal_eval(value) if isinstance(value, str) else value
    except (ValueError, SyntaxError):
        raise RowError(f"field 'target_instances' is not a list literal: {value!r:.80}") from None
    if not isinstance(boxes, list | tuple) or not all(
            isinstance(b, list | tuple) and len(b) == 4 and all(isinstance(x, int | float) for x in b) for b in boxes):
        raise RowError(f"field 'target_instances' must be a list of [x1, y1, x2, y2] boxes, got {value!r:.80}")
    return [[float(x) for x in b] for b in boxes]


def load_treebench(path: str | Path, blobs: BlobStore, *, limit: int | None = None) -> Iterator[Task | LoadError]:
    p = Path(path).expanduser()
    p = p / DATASET_FILE if p.is_dir() else p
    if not p.is_file():
        raise FileNotFoundError(f"TreeBench dataset file not found: {p}")
    images = ImageColumn(blobs)
    for n, row in enumerate(iter_rows(p)):
        if limit is not None and n >= limit:
            return
        task_id = text_field(row, "index", required=False).strip() or f"row-{n}"
        try:
            options = letter_options(row)
            if len(options) < 2:
                raise RowError(f"needs at least 2 options (columns A, B, ...), got {len(options)}")
            answer = text_field(row, "answer").strip()
            if answer not in LETTERS[: len(options)]:
                raise RowError(f"field 'answer' must be one of the option letters, got {answer!r:.20}")
            category = text_field(row, "category")
            task, _, subtask = category.partition("/")
            targets = parse_targets(row.get("target_instances"))
            ref = images.put(row, task_id)
            try:
                info = probe(blobs.get(ref))
            except ImageError as e:
                raise RowError(f"field 'image' is not a readable image ({e})") from None
            gold = options[LETTERS.index(answer)]
            yield Task(id=task_id, turns=[Turn(text=text_field(row, "question"), images=[ref], reference=gold)],
                       tools=[], reference=gold, metadata={
                           "category": category, "task": task, "subtask": subtask, "options": options,
                           "answer_index": LETTERS.index(answer), "targets": targets, "n_targets": len(targets),
                           "width": info.width, "height": info.height,
                           "hint": text_field(row, "hint", required=False),
                           "mc_options": text_field(row, "multi-choice options", required=False)})
        except RowError as e:
            yield LoadError(task_id, f"row {n} (index {task_id}): {e}")
