"""Loader for MME-RealWorld (``variant: full|lite|cn``) in its three published forms.

- **Path form** (official, HF ``yifanzhang114/MME-RealWorld``): ``MME_RealWorld.json`` /
  ``MME_RealWorld_CN.json``, an array of {Question_id, Image (path under the image folder), Text,
  Answer choices ["(A) ..", ..], Ground truth, Task, Subtask, Category}. Ids: ``Question_id``.
- **Base64 form** (``MME-RealWorld-Base64``): JSON files of {index, image (base64), question,
  multi-choice options [..], answer, category "Task/Subtask", l2-category}. Ids: ``index``.
- **Table form** (VLMEvalKit's TSV, e.g. ``mme_realworld_lite.tsv``; lmms-eval's parquet with
  ``bytes``): the same fields, options in ``multi-choice options`` (a list, or its Python
  literal) or in the columns ``A``-``E``.

Option texts are ``option[4:]`` of each "(X) text" choice, as VLMEvalKit builds its columns.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.mcq.tables import (
    LETTERS,
    ImageColumn,
    RowError,
    image_bytes,
    iter_rows,
    letter_options,
    text_field,
)
from fasteval.suites.row_checks import PathOutsideRoot, confine

VARIANTS = ("full", "lite", "cn")
PATH_FORM_FILES = {"full": "MME_RealWorld.json", "cn": "MME_RealWorld_CN.json"}
TABLE_FILES = {"full": ("MME-RealWorld.tsv",), "lite": ("mme_realworld_lite.tsv", "MME-RealWorld-Lite.tsv"),
               "cn": ("MME-RealWorld-CN.tsv",)}


def fine_category(category: str) -> str:
    """The scripts' category key: lower-cased; anything with "attribute" becomes ``<first>/attribute``."""
    key = category.lower()
    return key.split("/")[0] + "/attribute" if "attribute" in key else key


def parse_choices(value: Any) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise RowError("field 'multi-choice options' is not a list literal") from None
        else:
            value = [line for line in text.splitlines() if line.startswith("(")]
    if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
        raise RowError(f"options must be a list of '(A) text' strings, got {value!r:.80}")
    return [str(c) for c in value]


def _task(task_id: str, question: str, options: list[str], answer: str, task: str, subtask: str,
          category: str, ref: str) -> Task:
    if len(options) < 2:
        raise RowError(f"needs at least 2 options, got {len(options)}")
    answer = answer.strip()
    if answer not in LETTERS[: len(options)]:
        raise RowError(f"the answer must be one of the option letters, got {answer!r:.20}")
    index = LETTERS.index(answer)
    return Task(id=task_id, turns=[Turn(text=question, images=[ref], reference=options[index])], tools=[],
                reference=options[index], metadata={
                    "task": task, "subtask": subtask, "category": category, "fine_category": fine_category(category),
                    "options": options, "answer_index": index})


def _path_form(rows: Iterator[dict[str, Any]], image_root: Path, roots: tuple[Path, ...],
               blobs: BlobStore) -> Iterator[Task | LoadError]:
    for n, row in enumerate(rows):
        task_id = text_field(row, "Question_id", required=False) or f"row-{n}"
        try:
            rel = text_field(row, "Image")
            try:
                data = confine(image_root / rel, roots).read_bytes()
            except PathOutsideRoot as e:
                raise RowError(str(e)) from None
            except OSError as e:
                raise RowError(f"cannot read image {rel!r} ({e.strerror or e})") from None
            if not data:
                raise RowError(f"image {rel!r} is empty")
            options = [c[4:] for c in parse_choices(row.get("Answer choices"))]
            yield _task(task_id, text_field(row, "Text"), options, text_field(row, "Ground truth"),
                        text_field(row, "Task"), text_field(row, "Subtask"), text_field(row, "Category"),
                        blobs.put(data))
        except RowError as e:
            yield LoadError(task_id, f"row {n} (Question_id {task_id}): {e}")


def _coded_form(rows: Iterator[dict[str, Any]], blobs: BlobStore) -> Iterator[Task | LoadError]:
    images = ImageColumn(blobs)
    for n, row in enumerate(rows):
        task_id = text_field(row, "index", required=False).strip() or f"row-{n}"
        try:
            if "__bad__" in row:
                raise RowError(str(row["__bad__"]))
            raw = row.get("multi-choice options")
            options = letter_options(row) if "A" in row else [c[4:] for c in parse_choices(raw)]
            parts = text_field(row, "category").split("/")
            if len(parts) < 2:
                raise RowError(f"field 'category' must be 'Task/Subtask', got {row.get('category')!r:.60}")
            field = "bytes" if "bytes" in row and "image" not in row else "image"
            ref = images.put(row, task_id, field) if field == "image" else blobs.put(image_bytes(row[field], field))
            yield _task(task_id, text_field(row, "question"), options, text_field(row, "answer"), parts[0], parts[1],
                        text_field(row, "l2-category"), ref)
        except RowError as e:
            yield LoadError(task_id, f"row {n} (index {task_id}): {e}")


def _first_row_has(path: Path, key: str) -> bool:
    for row in iter_rows(path):
        return isinstance(row, Mapping) and key in row
    return False


def load_mme_realworld(path: str | Path, blobs: BlobStore, *, variant: str = "full", limit: int | None = None,
                       image_root: str | None = None, allow_roots: tuple[Path, ...] = ()) -> Iterator[Task | LoadError]:
    """Tasks in file order (a folder of base64 JSON files: files in name order)."""
    p = Path(path).expanduser()
    items: Iterator[Task | LoadError]
    if p.is_dir():
        named = [p / PATH_FORM_FILES[variant]] if variant in PATH_FORM_FILES else []
        named += [p / t for t in TABLE_FILES[variant]]
        hit = next((f for f in named if f.is_file()), None)
        if hit is None:
            files = sorted(p.glob("*.json"))
            if not files:
                raise FileNotFoundError(f"MME-RealWorld {variant}: none of {', '.join(f.name for f in named)} "
                                        f"(nor base64 JSON files) in {p}")
            items = _coded_form((row for f in files for row in iter_rows(f)), blobs)
        else:
            p = hit
    if p.is_file():
        if p.suffix == ".json" and _first_row_has(p, "Question_id"):
            root = Path(image_root).expanduser() if image_root else p.parent
            items = _path_form(iter_rows(p), root, (root.resolve(), *allow_roots), blobs)
        else:
            items = _coded_form(iter_rows(p), blobs)
    for n, item in enumerate(items):
        if limit is not None and n >= limit:
            return
        yield item
