"""Read VisualToolBench tasks from the HF parquet (per-turn schema) or the reference dataset.json.

The parquet is several GB of embedded images, so it is read one row group at a time and only
the columns we use. A malformed row becomes a LoadError naming the row and the field, so the
rest of the suite still runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.core.types import ImageRef, Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError
from fasteval.suites.row_checks import ALLOW_OPTION, PathOutsideRoot, confine, image_roots

from .prompts import TOOL_NAMES

STEM_CATEGORIES = frozenset({"chemistry", "maths", "biology", "engineering", "physics"})
"""prompt_category values the official scorer merges into one "STEM" domain."""

_COLUMNS = (
    "id", "turncase", "num_turns", "prompt_category", "eval_focus",
    "turn_prompts", "turn_golden_answers", "rubrics_by_turn", "images", "images_by_turn",
)
_RUBRIC_COLUMNS = ("id", "turn_prompts", "rubrics_by_turn")


class RowError(ValueError):
    """A field of one dataset row is missing or malformed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def domain_of(category: str) -> str:
    """Domain used in the tables: the five STEM sub-categories merged, others as they are.

    Matched exactly, as the reference does (``"Physics"`` stays its own domain).
    """
    return "STEM" if category in STEM_CATEGORIES else category


def dataset_files(path: str | Path) -> list[Path]:
    """The data files behind the ``path`` option: a parquet, a dataset.json, or a folder of them."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"VisualToolBench data not found at {p}")
    parquets = sorted(p.rglob("*.parquet"))
    if parquets:
        # The HF repo history holds older exports beside test.parquet; prefer the current one.
        current = [f for f in parquets if f.name.startswith("test")]
        return current or parquets
    jsons = sorted(p.rglob("dataset.json"))
    if not jsons:
        raise FileNotFoundError(f"no *.parquet or dataset.json under {p}")
    return jsons


def iter_tasks(path: str | Path, blobs: BlobStore, limit: int | None = None,
               allow_image_root: str | list[str] | None = None) -> Iterator[Task | LoadError]:
    """Every task of the data at ``path``, in file order, stopping after ``limit`` rows.

    Image paths must resolve inside the ``path`` folder (or ``allow_image_root``).
    """
    count = 0
    base = Path(path) if Path(path).is_dir() else Path(path).parent
    roots = image_roots({ALLOW_OPTION: allow_image_root} if allow_image_root else {}, base)
    for f in dataset_files(path):
        rows = _parquet_rows(f, _COLUMNS) if f.suffix == ".parquet" else _json_rows(f)
        for index, row in rows:
            if limit is not None and count >= limit:
                return
            count += 1
            yield task_from_row(row, index, f, blobs, roots)


def _parquet_rows(path: Path, wanted: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    columns = [c for c in wanted if c in pf.schema_arrow.names]
    index = 0
    for rg in range(pf.num_row_groups):
        table = pf.read_row_group(rg, columns=columns)
        for batch in table.to_batches(max_chunksize=16):
            for row in batch.to_pylist():
                yield index, row
                index += 1
        del table


def _json_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON array of tasks")
    yield from enumerate(data)


def task_from_row(row: Any, index: int, source: Path, blobs: BlobStore,
                  roots: tuple[Path, ...] = ()) -> Task | LoadError:
    """One row of either format as a Task, or a LoadError that names the row and field.

    ``roots``: folders image paths may resolve into (default: the data file's folder).
    """
    raw_id = row.get("id") if isinstance(row, dict) else None
    task_id = str(raw_id) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) and raw_id != "" \
        else f"row{index}"
    where = "/".join(source.parts[-2:])  # the split folder tells the two dataset.json files apart
    try:
        if not isinstance(row, dict):
            raise RowError("<row>", "not an object")
        return _build_task(row, task_id, source, blobs, roots or (source.parent.resolve(),))
    except RowError as e:
        return LoadError(task_id=task_id, message=f"{where} row {index}, field {e}")
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        # A row problem no check foresaw is still this row's error, never the whole file's.
        return LoadError(task_id=task_id, message=f"{where} row {index}: {type(e).__name__}: {str(e)[:300]}")


def _build_task(row: dict[str, Any], task_id: str, source: Path, blobs: BlobStore, roots: tuple[Path, ...]) -> Task:
    if not row.get("id"):
        raise RowError("id", "missing")
    if not isinstance(row["id"], str | int) or isinstance(row["id"], bool):
        raise RowError("id", f"expected a string or an integer, got {type(row['id']).__name__}")
    prompts = _str_list(row, "turn_prompts")
    if not prompts:
        raise RowError("turn_prompts", "empty")
    goldens = _str_list(row, "turn_golden_answers")
    if len(goldens) != len(prompts):
        raise RowError("turn_golden_answers", f"{len(goldens)} answers for {len(prompts)} turns")
    rubric_texts = _str_list(row, "rubrics_by_turn")
    if len(rubric_texts) != len(prompts):
        raise RowError("rubrics_by_turn", f"{len(rubric_texts)} entries for {len(prompts)} turns")
    rubrics = [parse_rubrics(text, f"rubrics_by_turn[{t}]") for t, text in enumerate(rubric_texts)]

    images_by_turn, flat = _images(row, source, blobs, len(prompts), roots)
    single = len(prompts) == 1
    if single and flat:
        # The reference sends image_paths (the flat list) for single-turn tasks.
        images_by_turn = [flat]

    category = _str_field(row, "prompt_category")
    turns = [Turn(text=p, images=imgs, reference=g) for p, imgs, g in zip(prompts, images_by_turn, goldens, strict=True)]
    metadata: dict[str, Any] = {
        "prompt_category": category,
        "domain": domain_of(category),
        "eval_focus": _str_field(row, "eval_focus"),
        # Routed by prompt count, as download_dataset.py does; the raw column is kept too.
        "turncase": "single-turn" if single else "multi-turn",
        "turncase_raw": row.get("turncase"),
        "num_turns": len(prompts),
        "num_images": sum(len(i) for i in images_by_turn),
        "rubrics": rubrics,
    }
    return Task(id=task_id, turns=turns, tools=list(TOOL_NAMES), reference=goldens, metadata=metadata)


def _str_field(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise RowError(name, f"expected a string, got {type(value).__name__}")
    return value


def _str_list(row: dict[str, Any], name: str) -> list[str]:
    value = row.get(name)
    if isinstance(value, str):
        # Some exports store list columns as JSON text.
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise RowError(name, f"not a list and not JSON: {e}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RowError(name, "expected a list of strings")
    return value


def parse_rubrics(text: Any, field: str) -> list[dict[str, Any]]:
    """One turn's rubric JSON object (keyed by rubric id) as a list of rubric dicts with ``id``."""
    if isinstance(text, str):
        if not text.strip():
            raise RowError(field, "empty rubric text")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise RowError(field, f"invalid JSON: {e}") from None
    else:
        obj = text
    if not isinstance(obj, dict):
        raise RowError(field, "expected an object keyed by rubric id")
    # An empty object is a turn without rubrics: no weight, as the reference's loop over it gives.
    out: list[dict[str, Any]] = []
    for rid, rubric in obj.items():
        if not isinstance(rubric, dict):
            raise RowError(f"{field}.{rid}", "not an object")
        desc = rubric.get("description")
        if not isinstance(desc, str) or not desc.strip():
            raise RowError(f"{field}.{rid}.description", "missing")
        weight = rubric.get("weight")
        try:
            w = float(weight)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise RowError(f"{field}.{rid}.weight", f"not a number: {weight!r}") from None
        if w <= 0:
            raise RowError(f"{field}.{rid}.weight", f"not positive: {weight!r}")
        out.append({**rubric, "id": str(rid), "weight": int(w) if w.is_integer() else w})
    return out


def _images(row: dict[str, Any], source: Path, blobs: BlobStore, n_turns: int,
            roots: tuple[Path, ...]) -> tuple[list[list[ImageRef]], list[ImageRef]]:
    """Per-turn and flat image refs, from embedded HF Image structs or dataset.json paths."""
    if "images_by_turn_paths" in row or "image_paths" in row:
        by_turn_raw = row.get("images_by_turn_paths") or []
        flat_raw = row.get("image_paths") or []
        by_turn_field, flat_field = "images_by_turn_paths", "image_paths"
    else:
        by_turn_raw = row.get("images_by_turn") or []
        flat_raw = row.get("images") or []
        by_turn_field, flat_field = "images_by_turn", "images"
    if not isinstance(by_turn_raw, list) or len(by_turn_raw) > n_turns:
        raise RowError(by_turn_field, f"expected at most {n_turns} per-turn lists")
    by_turn: list[list[ImageRef]] = []
    for t in range(n_turns):
        items = by_turn_raw[t] if t < len(by_turn_raw) else None
        if items is None:
            by_turn.append([])
            continue
        if not isinstance(items, list):
            raise RowError(f"{by_turn_field}[{t}]", "expected a list of images")
        by_turn.append([_put_image(x, f"{by_turn_field}[{t}][{i}]", source, blobs, roots)
                        for i, x in enumerate(items)])
    if not isinstance(flat_raw, list):
        raise RowError(flat_field, "expected a list of images")
    flat = [_put_image(x, f"{flat_field}[{i}]", source, blobs, roots) for i, x in enumerate(flat_raw)]
    return by_turn, flat


def _put_image(item: Any, field: str, source: Path, blobs: BlobStore, roots: tuple[Path, ...]) -> ImageRef:
    if isinstance(item, dict):
        data = item.get("bytes")
        if data:
            if not isinstance(data, bytes | bytearray):
                raise RowError(field, f"image bytes must be binary, got {type(data).__name__}")
            return blobs.put(bytes(data))
        item = item.get("path")
    if isinstance(item, str) and item:
        found = _resolve_image_path(item, source)
        if found is None:
            raise RowError(field, f"image file {item[:200]!r} not found near {source}")
        try:
            data = confine(found, roots).read_bytes()
        except PathOutsideRoot as e:
            raise RowError(field, str(e)) from None
        except OSError as e:
            raise RowError(field, f"image file {item[:200]!r} cannot be read ({e.strerror})") from None
        return blobs.put(data)
    raise RowError(field, "neither image bytes nor a path")


def _resolve_image_path(rel: str, source: Path) -> Path | None:
    """dataset.json stores paths relative to the repo root (``data/<split>/images/...``)."""
    p = Path(rel)
    if p.is_absolute():
        return p if p.is_file() else None
    bases = [source.parent, *source.parent.parents[:3]]
    for base in bases:
        if (base / p).is_file():
            return base / p
    # The export folder may have been moved: match from the split folder down.
    parts = p.parts
    if "images" in parts:
        tail = Path(*parts[parts.index("images"):])
        if (source.parent / tail).is_file():
            return source.parent / tail
    return None


def load_rubric_weights(path: str | Path) -> dict[str, list[dict[str, float]]]:
    """Rubric id -> weight per turn for every task, without touching images.

    Accepts the dataset (parquet or dataset.json) or a reference ``clean_rubrics`` file (a list
    of ``{task_id, rubrics}`` or ``{task_id, turns: [{rubrics}]}``).
    """
    out: dict[str, list[dict[str, float]]] = {}
    for f in dataset_files(path):
        if f.suffix == ".parquet":
            rows: Any = (r for _, r in _parquet_rows(f, _RUBRIC_COLUMNS))
        else:
            rows = json.loads(f.read_text(encoding="utf-8"))
        for row in rows:
            task_id = str(row.get("id") or row.get("task_id"))
            if "rubrics_by_turn" in row:
                turns = [parse_rubrics(t, "rubrics_by_turn") for t in _str_list(row, "rubrics_by_turn")]
            elif "turns" in row:
                turns = [parse_rubrics(t.get("rubrics"), "turns.rubrics") for t in row["turns"]]
            else:
                turns = [parse_rubrics(row.get("rubrics"), "rubrics")]
            out[task_id] = [{r["id"]: float(r["weight"]) for r in turn} for turn in turns]
    return out
