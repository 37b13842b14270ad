"""Reading VistaHop records (JSON array, JSONL, or a parquet export) into Tasks.

The public runner reads verl/MMSearch-R1 style records: ``prompt`` (chat messages, the first
user string is the question), ``reward_model.ground_truth``, ``image`` and the pre-computed
reverse-image-search ``image_search_title_list`` / ``image_search_thumbnail_list``. Images may
be paths relative to the data root, data URLs, bare base64, raw bytes, or HF ``Image`` structs
(``{"bytes", "path"}``) as in a parquet export. Every image goes into the BlobStore once, so a
Task carries only refs. A bad row becomes a LoadError that names the row and the field.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fasteval.core.types import ImageRef, Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.row_checks import PathOutsideRoot, confine

IMAGE_SEARCH_MAX_RESULTS = 5
"""The reference caps the pre-computed reverse-image results at five."""

_STEP_KEYS = ("evidence_steps", "num_evidence_steps", "evidence_step_count", "num_steps", "num_hops", "hops")
_LEVEL_KEYS = ("level", "difficulty_level", "difficulty")
_CATEGORY_KEYS = ("category", "scenario", "domain")


class RowError(ValueError):
    """One field of one record is unusable."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(slots=True)
class LoaderConfig:
    """What the loader needs from the suite options."""

    path: Path
    root: Path
    dataset: str = "vistahop"
    limit: int | None = None
    all_images: bool = False
    """False (reference): only the first image of a record is shown, as the runner does."""
    image_search_max_results: int = IMAGE_SEARCH_MAX_RESULTS
    image_roots: tuple[Path, ...] = ()
    """Folders image paths may resolve into; empty means ``root`` only."""
    require_levels: bool = False
    """Stop loading at the first record without evidence-step or level fields (the L1/L2/L3 table
    would otherwise be silently empty)."""
    level_field: str | None = None
    """The one field holding the evidence steps (a count or a list) or the level, instead of guessing."""

    def roots(self) -> tuple[Path, ...]:
        return self.image_roots or (self.root.expanduser().resolve(),)


class LevelsMissing(ValueError):
    """A record has no field the L1/L2/L3 levels can come from."""


def level_of(steps: int) -> str:
    """Paper Table 2: L1 for H < 5, L2 for 5 <= H < 10, L3 for H >= 10."""
    if steps < 5:
        return "L1"
    return "L2" if steps < 10 else "L3"


def iter_raw_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (row index, decoded row or a RowError) in file order.

    Indices follow the reference: a JSONL line that fails to parse still takes its index, so
    ids of later rows never shift when one line is broken.
    """
    if path.suffix == ".parquet":
        yield from _iter_parquet(path)
        return
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return
    if lines[0].startswith("["):
        data = json.loads("\n".join(lines))
        if not isinstance(data, list):
            raise ValueError(f"{path}: JSON root is not a list")
        yield from enumerate(data)
        return
    index = 0
    for line in lines:
        if line.endswith(","):
            line = line[:-1]
        if line in ("[", "]"):
            continue
        try:
            yield index, json.loads(line)
        except json.JSONDecodeError as e:
            yield index, RowError("json", f"line is not valid JSON ({e.msg} at column {e.colno})")
        index += 1


def _iter_parquet(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    # Batches keep memory flat: the public subset is ~495 MB of embedded images.
    index = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=32):
        for row in batch.to_pylist():
            yield index, row
            index += 1


def load_tasks(config: LoaderConfig, blobs: BlobStore) -> Iterator[Task | LoadError]:
    """Yield a Task (or a LoadError) per record, in file order, with ids ``{dataset}-{index}``."""
    count = 0
    for index, raw in iter_raw_rows(config.path):
        if config.limit is not None and count >= config.limit:
            return
        count += 1
        task_id = f"{config.dataset}-{index}"
        try:
            if isinstance(raw, RowError):
                raise raw
            task: Task | LoadError = parse_record(raw, task_id, index, config, blobs)
        except RowError as e:
            task = LoadError(task_id=task_id, message=f"{config.path.name} row {index}: field {e}")
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            # A row problem no check foresaw is still this row's error, never the whole file's.
            task = LoadError(task_id=task_id, message=f"{config.path.name} row {index}: "
                                                      f"{type(e).__name__}: {str(e)[:300]}")
        if config.require_levels and isinstance(task, Task) and "level" not in task.metadata:
            looked = [config.level_field] if config.level_field else [*_STEP_KEYS, *_LEVEL_KEYS]
            raise LevelsMissing(
                f"{config.path.name} row {index}: no evidence-step or level field (looked for {looked} in the "
                "record, extra_info and metadata), so the L1/L2/L3 table would be empty; name the field with "
                "the option level_field, or set require_levels: false to run without levels")
        yield task


def parse_record(raw: Any, task_id: str, index: int, config: LoaderConfig, blobs: BlobStore) -> Task:
    """Turn one record into a Task; raise RowError naming the field that is wrong."""
    if not isinstance(raw, dict):
        raise RowError("<row>", f"expected an object, got {type(raw).__name__}")
    question = _question(raw.get("prompt"))
    golds = _ground_truth(raw.get("reward_model"))
    images = _as_list(raw.get("image"), "image")
    if not images:
        raise RowError("image", "no image")
    refs = [_image_ref(entry, config, blobs, f"image[{i}]") for i, entry in enumerate(images)]
    titles, thumbs = _image_search(raw, config, blobs)
    metadata: dict[str, Any] = {
        "question": question,
        "source_index": index,
        "all_images": refs,
        "image_search_titles": titles,
        "image_search_thumbnails": thumbs,
    }
    if isinstance(raw.get("data_source"), str):
        metadata["data_source"] = raw["data_source"]
    metadata.update(_annotations(raw, config.level_field))
    shown = refs if config.all_images else refs[:1]
    return Task(id=task_id, turns=[Turn(text=question, images=shown, reference=golds)],
                reference=golds, metadata=metadata)


def _question(prompt: Any) -> str:
    if isinstance(prompt, str):
        try:
            prompt = json.loads(prompt)
        except json.JSONDecodeError:
            raise RowError("prompt", "a string that is not a JSON list of messages") from None
    messages = _as_list(prompt, "prompt")
    for i, msg in enumerate(messages):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                # A parts list: keep its text parts, as a chat template would render them.
                content = "".join(p.get("text") or "" for p in content if isinstance(p, dict))
            if not isinstance(content, str):
                raise RowError(f"prompt[{i}].content", "user content is not text")
            question = content.replace("<image>", "").strip()
            if not question:
                raise RowError(f"prompt[{i}].content", "empty question")
            return question
    raise RowError("prompt", "no user message")


def _ground_truth(reward_model: Any) -> list[str]:
    if not isinstance(reward_model, dict):
        raise RowError("reward_model", "missing or not an object")
    gt = reward_model.get("ground_truth")
    golds = [gt] if isinstance(gt, str) else _as_list(gt, "reward_model.ground_truth")
    if not golds or not all(isinstance(g, str | int | float) and not isinstance(g, bool) for g in golds):
        raise RowError("reward_model.ground_truth", "expected a string or a non-empty list of strings")
    out = [str(g).strip() for g in golds]
    if not any(out):
        raise RowError("reward_model.ground_truth", "only empty answers")
    return out


def _as_list(value: Any, field: str) -> list[Any]:
    if value is None:
        raise RowError(field, "missing")
    if isinstance(value, list | tuple):
        return list(value)
    if hasattr(value, "tolist"):  # numpy arrays from a pandas-written export
        return list(value.tolist())
    if isinstance(value, str | bytes | dict):
        return [value]
    raise RowError(field, f"expected a list, got {type(value).__name__}")


def _image_ref(entry: Any, config: LoaderConfig, blobs: BlobStore, field: str) -> ImageRef:
    data = _image_bytes(entry, config, field)
    if data is None:
        raise RowError(field, f"image file not found under {config.root}: {str(entry)[:200]!r}")
    return blobs.put(data)


def _image_bytes(entry: Any, config: LoaderConfig, field: str) -> bytes | None:
    """Bytes of an image entry; None when it names a file that does not exist.

    A path that leads outside the dataset's folders is a RowError, not a read.
    """
    root = config.root
    if isinstance(entry, dict):  # HF Image struct {"bytes": ..., "path": ...}
        if entry.get("bytes"):
            return _image_bytes(entry["bytes"], config, field)
        if entry.get("path"):
            return _image_bytes(entry["path"], config, field)
        raise RowError(field, "image struct has neither bytes nor path")
    if isinstance(entry, bytes | bytearray):
        if not entry:
            raise RowError(field, "empty image bytes")
        return bytes(entry)
    if not isinstance(entry, str) or not entry:
        raise RowError(field, f"expected a path, data URL, base64 or bytes, got {type(entry).__name__}")
    if entry.startswith("data:"):
        _, _, payload = entry.partition(",")
        return _b64(payload, field)
    # Base64 has no "." while file names have extensions; JPEG base64 even starts with "/9j/".
    if "." in entry or len(entry) < 64:
        path = Path(entry) if Path(entry).is_absolute() else root / entry
        try:
            path = confine(path, config.roots())
        except PathOutsideRoot as e:
            raise RowError(field, str(e)) from None
        try:
            return path.read_bytes() if path.is_file() else None
        except OSError:
            return None
    return _b64(entry, field)


def _b64(payload: str, field: str) -> bytes:
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RowError(field, "invalid base64 image data") from None
    if not data:
        raise RowError(field, "empty image data")
    return data


def _image_search(raw: dict[str, Any], config: LoaderConfig, blobs: BlobStore) -> tuple[list[str], list[str | None]]:
    """Titles and thumbnail refs (None where the thumbnail file is missing, as the reference skips it)."""
    cap = config.image_search_max_results
    titles: list[str] = []
    if raw.get("image_search_title_list") is not None:
        items = _as_list(raw["image_search_title_list"], "image_search_title_list")[:cap]
        if not all(isinstance(t, str) for t in items):
            raise RowError("image_search_title_list", "titles must be strings")
        titles = items
    thumbs: list[str | None] = []
    if raw.get("image_search_thumbnail_list") is not None:
        items = _as_list(raw["image_search_thumbnail_list"], "image_search_thumbnail_list")[:cap]
        for i, entry in enumerate(items):
            data = _image_bytes(entry, config, f"image_search_thumbnail_list[{i}]")
            thumbs.append(None if data is None else blobs.put(data))
    return titles, thumbs


def _annotations(raw: dict[str, Any], level_field: str | None = None) -> dict[str, Any]:
    """Evidence steps, level and category, from the record or its ``extra_info``."""
    sources = [raw] + [raw[k] for k in ("extra_info", "metadata") if isinstance(raw.get(k), dict)]
    found: dict[str, Any] = {}
    step_keys = _STEP_KEYS if level_field is None else (level_field,)
    level_keys = _LEVEL_KEYS if level_field is None else (level_field,)
    for src in sources:
        if level_field is not None and level_field in src and src[level_field] is not None:
            value = src[level_field]
            if isinstance(value, str) and value.strip().upper().startswith("L"):
                found.setdefault("level", _level(value, level_field))
                continue
        for key in step_keys:
            if key in src and src[key] is not None and "evidence_steps" not in found:
                found["evidence_steps"] = _int(src[key], key)
        for key in level_keys:
            if level_field is not None and "evidence_steps" in found:
                break
            if key in src and src[key] is not None and "level" not in found:
                found["level"] = _level(src[key], key)
        for key in _CATEGORY_KEYS:
            if isinstance(src.get(key), str) and key not in found:
                found[key] = src[key]
    if "level" not in found and "evidence_steps" in found:
        found["level"] = level_of(found["evidence_steps"])
    return found


def _int(value: Any, field: str) -> int:
    if isinstance(value, list | tuple):  # a list of steps: count them
        return len(value)
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise RowError(field, f"not a step count: {value!r}") from None
    if n < 0 or isinstance(value, bool):
        raise RowError(field, f"not a step count: {value!r}")
    return n


def _level(value: Any, field: str) -> str:
    text = str(value).strip().upper()
    if text in ("1", "2", "3"):
        text = "L" + text
    if text not in ("L1", "L2", "L3"):
        raise RowError(field, f"level must be L1, L2 or L3, got {value!r}")
    return text
