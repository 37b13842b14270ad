"""The loader reads JSON, JSONL and parquet exports into Tasks with stable ids, refs and levels."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.suites.vistahop import LoaderConfig, level_of, load_tasks


def _load(path: Path, blobs: BlobStore, **kw: object) -> list[Task | LoadError]:
    config = LoaderConfig(path=path, root=path.parent, **kw)  # type: ignore[arg-type]
    return list(load_tasks(config, blobs))


def test_json_array_gives_tasks_with_reference_ids_golds_and_blob_refs(json_file: Path, blobs: BlobStore) -> None:
    items = _load(json_file, blobs)
    assert all(isinstance(t, Task) for t in items)
    assert [t.id for t in items if isinstance(t, Task)] == ["vistahop-0", "vistahop-1", "vistahop-2"]
    first = items[0]
    assert isinstance(first, Task)
    assert first.turns[0].text == "Which company owns the ship?"  # <image> stripped
    assert first.reference == ["Hapag-Lloyd", "Hapag Lloyd AG"]
    ref = first.turns[0].images[0]
    assert blobs.get(ref) == (json_file.parent / "images" / "a.png").read_bytes()


def test_only_first_image_is_shown_in_reference_and_all_in_fixed(json_file: Path, blobs: BlobStore) -> None:
    second = _load(json_file, blobs)[1]
    assert isinstance(second, Task)
    assert len(second.turns[0].images) == 1 and len(second.metadata["all_images"]) == 2
    fixed = _load(json_file, blobs, all_images=True)[1]
    assert isinstance(fixed, Task) and len(fixed.turns[0].images) == 2


def test_image_search_results_are_capped_at_five_and_stored_as_refs(
    json_file: Path, blobs: BlobStore, png: Callable[..., bytes]
) -> None:
    first, second, third = _load(json_file, blobs)
    assert isinstance(first, Task) and isinstance(second, Task) and isinstance(third, Task)
    assert first.metadata["image_search_titles"] == [f"title {i}" for i in range(5)]
    thumbs = first.metadata["image_search_thumbnails"]
    assert len(thumbs) == 5 and all(t in blobs for t in thumbs)
    # A bare base64 thumbnail is decoded into the blob store too.
    assert blobs.get(second.metadata["image_search_thumbnails"][0]) == png((1, 2, 3), (8, 8))
    assert third.metadata["image_search_titles"] == [] and third.metadata["image_search_thumbnails"] == []


def test_levels_come_from_steps_or_explicit_labels(json_file: Path, blobs: BlobStore) -> None:
    first, second, third = _load(json_file, blobs)
    assert isinstance(first, Task) and isinstance(second, Task) and isinstance(third, Task)
    assert (first.metadata["evidence_steps"], first.metadata["level"]) == (12, "L3")
    assert first.metadata["category"] == "Society"
    assert second.metadata["level"] == "L2" and "evidence_steps" not in second.metadata
    assert third.metadata["level"] == "L1"
    assert [level_of(h) for h in (1, 4, 5, 9, 10, 30)] == ["L1", "L1", "L2", "L2", "L3", "L3"]


def test_jsonl_with_data_urls_and_broken_rows_names_row_and_field(
    tmp_path: Path, blobs: BlobStore, png: Callable[..., bytes], make_record: Callable[..., dict[str, Any]],
    jsonl_writer: Callable[[Path, list[Any]], Path],
) -> None:
    record = make_record
    data_url = "data:image/png;base64," + base64.b64encode(png((9, 9, 9))).decode()
    rows: list[object] = [
        record("Q0?", ["a0"], [data_url]),
        "{not json",
        record("Q2?", None, [data_url]),
        record("Q3?", ["a3"], ["missing.png"]),
        record("Q4?", ["a4"], [data_url], level="L7"),
        {**record("Q5?", ["a5"], [data_url]), "prompt": [{"role": "system", "content": "x"}]},
        record("Q6?", ["a6"], [data_url], evidence_steps=7),
    ]
    items = _load(jsonl_writer(tmp_path / "v.jsonl", rows), blobs)
    assert [i.task_id if isinstance(i, LoadError) else i.id for i in items] == [f"vistahop-{k}" for k in range(7)]
    errors = {i.task_id: i.message for i in items if isinstance(i, LoadError)}
    assert set(errors) == {"vistahop-1", "vistahop-2", "vistahop-3", "vistahop-4", "vistahop-5"}
    assert "row 1" in errors["vistahop-1"] and "json" in errors["vistahop-1"]
    assert "row 2" in errors["vistahop-2"] and "reward_model.ground_truth" in errors["vistahop-2"]
    assert "image[0]" in errors["vistahop-3"] and "missing.png" in errors["vistahop-3"]
    assert "level" in errors["vistahop-4"]
    assert "prompt" in errors["vistahop-5"]
    last = items[6]
    assert isinstance(last, Task) and last.metadata["level"] == "L2"


def test_bare_base64_jpeg_starting_with_slash_is_data_not_a_path(
    tmp_path: Path, blobs: BlobStore, make_record: Callable[..., dict[str, Any]],
    jsonl_writer: Callable[[Path, list[Any]], Path],
) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (20, 20), (200, 10, 10)).save(buf, format="JPEG")
    jpeg_b64 = base64.b64encode(buf.getvalue()).decode()
    assert jpeg_b64.startswith("/9j/")
    row = make_record("Q?", ["a"], [jpeg_b64], titles=["t"], thumbs=[jpeg_b64, "thumbs/gone.png"])
    (task,) = _load(jsonl_writer(tmp_path / "v.jsonl", [row]), blobs)
    assert isinstance(task, Task) and blobs.get(task.turns[0].images[0]) == buf.getvalue()
    # A thumbnail file that is missing is skipped, as the runner skips it; the title stays.
    assert task.metadata["image_search_thumbnails"][1] is None


def test_parquet_export_with_hf_image_structs_matches_json(
    tmp_path: Path, blobs: BlobStore, png: Callable[..., bytes]
) -> None:
    img, thumb = png((5, 6, 7)), png((7, 6, 5), (10, 10))
    rows = [
        {
            "prompt": [{"role": "user", "content": "<image>Who designed it?"}],
            "reward_model": {"ground_truth": ["Gustave Eiffel"], "style": "rule"},
            "image": [{"bytes": img, "path": "x.png"}],
            "image_search_title_list": ["Eiffel Tower - Wikipedia"],
            "image_search_thumbnail_list": [{"bytes": thumb, "path": None}],
            "extra_info": {"index": 0, "evidence_steps": 10},
        },
        {
            "prompt": [{"role": "user", "content": "<image>When?"}],
            "reward_model": {"ground_truth": ["1889"], "style": "rule"},
            "image": [{"bytes": img, "path": "x.png"}],
            "image_search_title_list": [],
            "image_search_thumbnail_list": [],
            "extra_info": {"index": 1, "evidence_steps": 6},
        },
    ]
    path = tmp_path / "subset1.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    items = _load(path, blobs)
    assert all(isinstance(t, Task) for t in items)
    first, second = items
    assert isinstance(first, Task) and isinstance(second, Task)
    assert first.reference == ["Gustave Eiffel"] and blobs.get(first.turns[0].images[0]) == img
    assert blobs.get(first.metadata["image_search_thumbnails"][0]) == thumb
    assert (first.metadata["level"], second.metadata["level"]) == ("L3", "L2")


def test_suite_load_respects_limit_and_ids_are_stable(json_file: Path, tmp_path: Path) -> None:
    suite = make_suite("vistahop", {"path": str(json_file), "limit": 2}, BlobStore(tmp_path / "b1"))
    again = make_suite("vistahop", {"path": str(json_file)}, BlobStore(tmp_path / "b2"))
    ids = [t.id if isinstance(t, Task) else t.task_id for t in suite.load()]
    assert ids == ["vistahop-0", "vistahop-1"]
    firsts = [t for t in again.load() if isinstance(t, Task)][:2]
    assert [t.id for t in firsts] == ids
    assert json.dumps(firsts[0].metadata, sort_keys=True)  # metadata stays JSON-serialisable


def test_missing_level_fields_fail_loudly_unless_named_or_waived(tmp_path: Path, blobs: BlobStore,
                                                                 png: Callable[..., bytes]) -> None:
    import pytest

    from fasteval.engine.plan import load_suite
    from fasteval.suites.vistahop.loader import LevelsMissing

    (tmp_path / "a.png").write_bytes(png((1, 1, 1)))
    rows = [{"prompt": [{"role": "user", "content": "<image>Q?"}], "reward_model": {"ground_truth": ["x"]},
             "image": ["a.png"], "extra_info": {"hop_count": 11}}]
    path = tmp_path / "v.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(LevelsMissing, match="level_field"):
        _load(path, blobs, require_levels=True)
    (task,) = _load(path, blobs, require_levels=True, level_field="hop_count")
    assert isinstance(task, Task) and task.metadata["level"] == "L3"
    (waived,) = _load(path, blobs)
    assert isinstance(waived, Task) and "level" not in waived.metadata
    # Through the suite (require_levels on by default), the run gets one loud loader error record.
    run = load_suite({"name": "vistahop", "options": {"path": str(path)}}, blobs)
    (err,) = run.items
    assert isinstance(err, LoadError) and "L1/L2/L3 table would be empty" in err.message
