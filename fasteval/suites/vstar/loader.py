"""Loader for V* Bench: the official folders of image + JSON pairs, or VLMEvalKit's TSV.

- Folder form (HF ``craigwu/vstar_bench``): ``direct_attributes/`` and ``relative_position/``,
  each ``sa_NNNN.jpg`` beside ``sa_NNNN.json`` = {target_object, bbox, question, options}; the
  first option is the correct one. Task ids are ``<category>/<stem>``.
- TSV form (VLMEvalKit ``VStarBench.tsv``): ``index``, base64 ``image``, ``question``, ``A``..,
  ``answer`` (letter), ``category``. Task ids are the ``index``.
- JSONL form (``test_questions.jsonl`` of the same HF repo, read by lmms-eval): ``question_id``,
  ``image`` (path under the file's folder), ``text`` (question then ``(A) …`` options), ``category``,
  ``label`` (gold letter; options there are already shuffled). Options are parsed as lmms-eval does,
  each cut at its first line break (so a trailing instruction is not swallowed into the last one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.mcq.tables import LETTERS, ImageColumn, RowError, iter_rows, letter_options, text_field
from fasteval.suites.row_checks import PathOutsideRoot, confine
from fasteval.suites.vstar.option_scan import find_options

CATEGORIES = ("direct_attributes", "relative_position")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


def _task(task_id: str, question: str, options: list[str], answer_index: int, category: str, ref: str,
          **extra: Any) -> Task:
    if len(options) < 2:
        raise RowError(f"needs at least 2 options, got {len(options)}")
    return Task(id=task_id, turns=[Turn(text=question, images=[ref], reference=options[answer_index])],
                tools=[], reference=options[answer_index],
                metadata={"category": category, "options": options, "answer_index": answer_index, **extra})


def _folder_item(json_path: Path, category: str, root: Path, blobs: BlobStore) -> Task:
    try:
        ann = orjson.loads(json_path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise RowError(f"not JSON ({e})") from None
    if not isinstance(ann, dict):
        raise RowError("annotation is not an object")
    question = text_field(ann, "question")
    options = ann.get("options")
    if not isinstance(options, list) or not all(isinstance(o, str | int | float) for o in options):
        raise RowError(f"field 'options' must be a list of strings, got {options!r:.80}")
    image = next((json_path.with_suffix(s) for s in IMAGE_SUFFIXES if json_path.with_suffix(s).is_file()), None)
    if image is None:
        raise RowError(f"no image beside {json_path.name} ({'/'.join(IMAGE_SUFFIXES)})")
    try:
        data = confine(image, (root.resolve(),)).read_bytes()
    except PathOutsideRoot as e:
        raise RowError(str(e)) from None
    if not data:
        raise RowError(f"image {image.name} is empty")
    # The release puts the correct option first (penghao-wu/vstar README).
    return _task(f"{category}/{json_path.stem}", question, [str(o) for o in options], 0, category,
                 blobs.put(data), image_file=f"{category}/{image.name}")


def _load_folder(root: Path, blobs: BlobStore) -> Iterator[Task | LoadError]:
    found = [c for c in CATEGORIES if (root / c).is_dir()]
    if not found:
        raise FileNotFoundError(f"V*: {root} holds neither {' nor '.join(CATEGORIES)}/ (nor a .tsv)")
    for category in found:
        for json_path in sorted((root / category).glob("*.json")):
            task_id = f"{category}/{json_path.stem}"
            try:
                yield _folder_item(json_path, category, root, blobs)
            except (RowError, OSError) as e:
                yield LoadError(task_id, f"{task_id}: {e}")


def _load_tsv(path: Path, blobs: BlobStore) -> Iterator[Task | LoadError]:
    images = ImageColumn(blobs)
    for n, row in enumerate(iter_rows(path)):
        task_id = str(row.get("index", "")).strip() or f"row-{n}"
        try:
            options = letter_options(row)
            answer = text_field(row, "answer").strip()
            if answer not in LETTERS[: len(options)]:
                raise RowError(f"field 'answer' must be one of the option letters, got {answer!r:.20}")
            yield _task(task_id, text_field(row, "question"), options, LETTERS.index(answer),
                        text_field(row, "category"), images.put(row, task_id))
        except RowError as e:
            yield LoadError(task_id, f"row {n} (index {task_id}): {e}")




def _load_jsonl(path: Path, blobs: BlobStore) -> Iterator[Task | LoadError]:
    root = path.parent
    for n, row in enumerate(iter_rows(path)):
        task_id = text_field(row, "question_id", required=False) or f"row-{n}"
        try:
            if "__bad__" in row:
                raise RowError(str(row["__bad__"]))
            text = text_field(row, "text")
            found = find_options(text)
            if not found or [k for k, _ in found] != list(LETTERS[: len(found)]):
                raise RowError(f"field 'text' holds no (A) (B) ... options: {text!r:.80}")
            options = [v.strip().splitlines()[0].strip() for _, v in found]
            label = text_field(row, "label").strip().upper()
            if label not in LETTERS[: len(options)]:
                raise RowError(f"field 'label' must be one of the option letters, got {label!r:.20}")
            rel = text_field(row, "image")
            try:
                data = confine(root / rel, (root.resolve(),)).read_bytes()
            except PathOutsideRoot as e:
                raise RowError(str(e)) from None
            except OSError as e:
                raise RowError(f"cannot read image {rel!r} ({e.strerror or e})") from None
            question = text[: text.index("(A)")].strip()
            # ``lmms_text``: the row's own text, from which lmms-eval's prompt is built under reference
            yield _task(task_id, question, options, LETTERS.index(label), text_field(row, "category"),
                        blobs.put(data), image_file=rel, lmms_text=text)
        except RowError as e:
            yield LoadError(task_id, f"line {n + 1} (question_id {task_id}): {e}")


def load_vstar(path: str | Path, blobs: BlobStore, *, limit: int | None = None) -> Iterator[Task | LoadError]:
    """Tasks in a stable order (folder: category then file name; TSV: file order)."""
    p = Path(path).expanduser()
    if p.is_dir():
        items = _load_folder(p, blobs)
    else:
        items = _load_jsonl(p, blobs) if p.suffix.lower() == ".jsonl" else _load_tsv(p, blobs)
    for n, item in enumerate(items):
        if limit is not None and n >= limit:
            return
        yield item
