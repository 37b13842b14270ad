"""Loader for VisualProbe (Mini-o3): ``val.json`` per level, images under a base folder.

Rows: {images: [path relative to BASE_IMAGE_DIR], doc_id, problem ("<image>\\n" + question),
solution (open-ended), data_source (``visual_probe_easy|medium|hard``; the level)}. ``path`` is a
``val.json``, or a folder holding ``val.json`` or ``VisualProbe_{Easy,Medium,Hard}/val.json``.
Image paths resolve against ``image_root`` (default: the folder above the JSON's folder, where
``VisualProbe_Hard/data/...`` paths start, then the JSON's own folder). Ids:
``<data_source>/<doc_id>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.mcq.tables import RowError, iter_rows, text_field
from fasteval.suites.row_checks import PathOutsideRoot, confine

LEVELS = ("easy", "medium", "hard", "all")
LEVEL_FOLDERS = ("VisualProbe_Easy", "VisualProbe_Medium", "VisualProbe_Hard")
IMAGE_PLACEHOLDER = "<image>"


def level_of(data_source: str) -> str:
    return data_source.rsplit("_", 1)[-1] if data_source.startswith("visual_probe_") else data_source


def json_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "val.json").is_file():
        return [path / "val.json"]
    found = [path / f / "val.json" for f in LEVEL_FOLDERS if (path / f / "val.json").is_file()]
    if not found:
        raise FileNotFoundError(f"VisualProbe: no val.json in {path} (nor {'/, '.join(LEVEL_FOLDERS)}/)")
    return found


def _image(rel: str, bases: list[Path], blobs: BlobStore) -> str:
    for base in bases:
        candidate = base / rel
        if candidate.is_file():
            try:
                data = confine(candidate, [b.resolve() for b in bases]).read_bytes()
            except PathOutsideRoot as e:
                raise RowError(str(e)) from None
            if not data:
                raise RowError(f"image {rel!r} is empty")
            return blobs.put(data)
    raise RowError(f"image {rel!r} not found under {', '.join(str(b) for b in bases)}")


def load_visualprobe(path: str | Path, blobs: BlobStore, *, level: str = "all", limit: int | None = None,
                     image_root: str | None = None) -> Iterator[Task | LoadError]:
    kept = 0
    for json_path in json_files(Path(path).expanduser()):
        bases = [Path(image_root).expanduser()] if image_root else [json_path.parent.parent, json_path.parent]
        for n, row in enumerate(iter_rows(json_path)):
            if limit is not None and kept >= limit:
                return
            source = text_field(row, "data_source", required=False)
            if level != "all" and level_of(source) != level:
                continue
            kept += 1
            task_id = f"{source or 'unknown'}/{text_field(row, 'doc_id', required=False) or n}"
            try:
                if "__bad__" in row:
                    raise RowError(str(row["__bad__"]))
                images = row.get("images")
                if not isinstance(images, list) or not images or not all(isinstance(i, str) for i in images):
                    raise RowError(f"field 'images' must be a list of paths, got {images!r:.80}")
                problem = text_field(row, "problem")
                refs = [_image(rel, bases, blobs) for rel in images]
                question = problem.replace(IMAGE_PLACEHOLDER + "\n", "").replace(IMAGE_PLACEHOLDER, "").strip()
                solution = text_field(row, "solution")
                yield Task(id=task_id, turns=[Turn(text=question, images=refs, reference=solution)], tools=[],
                           reference=solution, metadata={"data_source": source, "level": level_of(source),
                                                         "problem": problem})
            except RowError as e:
                yield LoadError(task_id, f"{json_path.name} row {n} ({task_id}): {e}")
