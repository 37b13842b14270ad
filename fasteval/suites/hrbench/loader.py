"""Loader for HR-Bench 4K / 8K: ``hr_bench_{4k,8k}.tsv`` or ``.parquet`` with base64 images.

Columns: ``index``, ``question``, ``A``-``D``, ``answer`` (letter), ``category`` (``single`` =
FSP, ``cross`` = FCP), ``cycle_category`` (the option rotation the row belongs to), ``image``.
Each of the 200 questions appears under 4 rotations; rows of one question share the image, the
question and the option set, which is how ``question_group`` ties them together for circular
evaluation (the file's own label scheme is not relied on). Rows stream one at a time and each
image goes straight to the blob store, so an 8K release never sits in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.mcq.tables import LETTERS, ImageColumn, RowError, iter_rows, letter_options, text_field

VERSIONS = ("4k", "8k")
FILES = {v: (f"hr_bench_{v}.tsv", f"hr_bench_{v}.parquet") for v in VERSIONS}


def resolve(path: str | Path, version: str) -> Path:
    """The release file: ``path`` itself, or the version's TSV / parquet inside a folder."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    for name in FILES[version]:
        if (p / name).is_file():
            return p / name
    raise FileNotFoundError(f"HR-Bench {version}: none of {', '.join(FILES[version])} in {p}")


def question_group(image: str, question: str, options: list[str]) -> str:
    """One id for every rotation of a question: same image, question and option set."""
    key = "\x1f".join([image, question, *sorted(options)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def load_hrbench(path: str | Path, blobs: BlobStore, *, version: str = "4k",
                 limit: int | None = None) -> Iterator[Task | LoadError]:
    """Tasks in file order, ids = ``index``."""
    images = ImageColumn(blobs)
    for n, row in enumerate(iter_rows(resolve(path, version))):
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
            question = text_field(row, "question")
            ref = images.put(row, task_id)
            gold = options[LETTERS.index(answer)]
            yield Task(id=task_id, turns=[Turn(text=question, images=[ref], reference=gold)], tools=[],
                       reference=gold, metadata={
                           "category": text_field(row, "category"), "cycle": text_field(row, "cycle_category"),
                           "question_group": question_group(ref, question, options), "version": version,
                           "options": options, "answer_index": LETTERS.index(answer)})
        except RowError as e:
            yield LoadError(task_id, f"row {n} (index {task_id}): {e}")
