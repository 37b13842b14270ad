"""Loader for the official TIR-Bench release: ``TIR-Bench.json`` plus the unzipped ``data/``.

The JSON is an array of rows {id, task (older files: category), prompt, answer, image_1,
image_2, meta_data (older: metadata)}; image paths are relative to the folder holding the JSON.
Task ids are the dataset's ids, so they are stable across runs and machines. A row that cannot
become a task is yielded as a LoadError naming the row and the field, and loading goes on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.types import ImageRef, Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.row_checks import ALLOW_OPTION, PathOutsideRoot, confine, image_roots
from fasteval.suites.tirbench.scoring import TASK_TYPES, classify_string

DATASET_FILE = "TIR-Bench.json"


class RowError(ValueError):
    """A field of one row is missing or malformed; becomes a LoadError."""


def resolve_dataset(path: str | Path) -> tuple[Path, Path]:
    """(json file, image root) from either the release folder or the JSON file itself."""
    p = Path(path).expanduser()
    json_path = p / DATASET_FILE if p.is_dir() else p
    if not json_path.is_file():
        raise FileNotFoundError(f"TIR-Bench dataset file not found: {json_path}")
    return json_path, json_path.parent


def read_rows(json_path: Path) -> list[Any]:
    """The dataset rows; a file that is not a JSON array is an error for the whole suite."""
    data = orjson.loads(json_path.read_bytes())
    if not isinstance(data, list):
        raise ValueError(f"{json_path}: expected a JSON array of rows, got {type(data).__name__}")
    return data


def row_task_type(row: Mapping[str, Any]) -> Any:
    """The row's task type: ``task``, or ``category`` in older files."""
    return row["task"] if "task" in row else row.get("category")


def row_meta(row: Mapping[str, Any]) -> Any:
    """The row's metadata dict: ``meta_data``, or ``metadata`` in older files (None if absent)."""
    return row["metadata"] if "metadata" in row else row.get("meta_data")


def row_task_id(row: Any, index: int) -> str:
    """The dataset id as a string; rows without a usable id fall back to their position."""
    if isinstance(row, Mapping):
        rid = row.get("id")
        if (isinstance(rid, int) and not isinstance(rid, bool)) or (isinstance(rid, str) and rid.strip()):
            return str(rid).strip()
    return f"row-{index}"


def _require_str(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"field {name!r} must be a non-empty string, got {value!r:.80}")
    return value


def _read_image(root: Path, rel: str, name: str, blobs: BlobStore, roots: tuple[Path, ...] = ()) -> ImageRef:
    try:
        data = confine(root / rel, roots or (root.resolve(),)).read_bytes()
    except PathOutsideRoot as exc:
        raise RowError(f"field {name!r}: {exc}") from None
    except OSError as exc:
        raise RowError(f"field {name!r}: cannot read image {rel!r} ({exc.strerror or exc})") from None
    if not data:
        raise RowError(f"field {name!r}: image file {rel!r} is empty")
    return blobs.put(data)


def _answer_text(row: Mapping[str, Any]) -> str:
    if "answer" not in row:
        raise RowError("field 'answer' is missing")
    answer = row["answer"]
    # The reference str()s the answer; a bool, null or object would score nonsense silently.
    if answer is None or isinstance(answer, bool | dict) or not isinstance(answer, str | int | float | list):
        raise RowError(f"field 'answer' must be a string or a number, got {answer!r:.80}")
    text = str(answer)
    if not text.strip():
        raise RowError("field 'answer' is empty")
    return text


def row_to_task(row: Any, index: int, root: Path, blobs: BlobStore, roots: tuple[Path, ...] = ()) -> Task:
    """One validated row as a Task; raises RowError naming the faulty field.

    ``roots``: the folders images may be read from (default: ``root`` only).
    """
    if not isinstance(row, Mapping):
        raise RowError(f"is a {type(row).__name__}, not an object")
    if row_task_id(row, index).startswith("row-"):
        raise RowError(f"field 'id' must be an integer or a string, got {row.get('id')!r:.80}")
    task_type = row_task_type(row)
    if not isinstance(task_type, str) or task_type not in TASK_TYPES:
        raise RowError(f"field 'task' must be one of {', '.join(TASK_TYPES)}, got {task_type!r:.80}")
    prompt = _require_str(row, "prompt")
    answer = _answer_text(row)
    meta = row_meta(row)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise RowError(f"field 'meta_data' must be an object, got {meta!r:.80}")
    difficulty = meta.get("difficulty")
    if task_type == "jigsaw" and (
        isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty < 1
    ):
        raise RowError(f"field 'meta_data.difficulty' must be a positive integer for jigsaw, got {difficulty!r}")
    image_1 = _require_str(row, "image_1")
    images = [_read_image(root, image_1, "image_1", blobs, roots)]
    image_2 = row.get("image_2")
    if image_2 is not None:
        if not isinstance(image_2, str) or not image_2.strip():
            raise RowError(f"field 'image_2' must be a path or null, got {image_2!r:.80}")
        images.append(_read_image(root, image_2, "image_2", blobs, roots))
    metadata: dict[str, Any] = {
        "task_type": task_type,
        "row_index": index,
        "image_1": image_1,
        "image_2": image_2,
        "answer_type": classify_string(answer),
        "meta_data": meta,
    }
    if difficulty is not None:
        metadata["difficulty"] = difficulty
    return Task(
        id=row_task_id(row, index),
        turns=[Turn(text=prompt, images=images, reference=answer)],
        tools=[],
        reference=answer,
        metadata=metadata,
    )


def load_tirbench(
    path: str | Path,
    blobs: BlobStore,
    *,
    task_types: Collection[str] | None = None,
    limit: int | None = None,
    allow_image_root: str | list[str] | None = None,
) -> Iterator[Task | LoadError]:
    """Tasks in file order; ``task_types`` keeps only those types, ``limit`` the first N rows kept.

    Images are read one row at a time into the blob store, so memory stays flat even for the
    6944×9280 originals. Duplicate ids after the first are LoadErrors, keeping ids unique.
    Image paths must stay inside the dataset folder or ``allow_image_root``.
    """
    json_path, root = resolve_dataset(path)
    roots = image_roots({ALLOW_OPTION: allow_image_root} if allow_image_root else {}, root)
    seen: dict[str, int] = {}
    kept = 0
    for index, row in enumerate(read_rows(json_path)):
        if limit is not None and kept >= limit:
            return
        if task_types is not None and isinstance(row, Mapping) and (
                not isinstance(row_task_type(row), str) or row_task_type(row) not in task_types):
            continue
        kept += 1
        task_id = row_task_id(row, index)
        if task_id in seen:
            yield LoadError(f"row-{index}", f"row {index}: field 'id' {task_id!r} repeats row {seen[task_id]}")
            continue
        seen[task_id] = index
        where = f"row {index}" if task_id.startswith("row-") else f"row {index} (id {task_id})"
        try:
            task = row_to_task(row, index, root, blobs, roots)
        except RowError as exc:
            yield LoadError(task_id, f"{where}: {exc}")
            continue
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # A row problem no check foresaw is still this row's error, never the whole file's.
            yield LoadError(task_id, f"{where}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        yield task
