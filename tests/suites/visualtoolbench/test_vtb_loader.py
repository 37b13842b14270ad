"""The loader reads both official formats into the same Tasks and names malformed rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from vtb_fixtures import (
    BAD_ID,
    BLUE,
    GREEN,
    MULTI_ID,
    RED,
    SINGLE_ID,
    row,
    rubric,
    sample_rows,
    write_dataset_json,
    write_parquet,
)

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.suites.visualtoolbench import VisualToolBenchSuite, iter_tasks, load_rubric_weights


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


def _by_id(items: list[Task | LoadError]) -> dict[str, Any]:
    return {i.task_id if isinstance(i, LoadError) else i.id: i for i in items}


def _check_tasks(items: list[Task | LoadError], blobs: BlobStore, bad_row: str) -> None:
    got = _by_id(items)
    single, multi, bad = got[SINGLE_ID], got[MULTI_ID], got[BAD_ID]
    assert isinstance(single, Task) and isinstance(multi, Task)

    assert [t.text for t in single.turns] == ["What does the gauge on the left read?"]
    assert [blobs.get(r) for r in single.turns[0].images] == [RED, GREEN]
    assert single.turns[0].reference == "It reads 42 kPa."
    assert single.metadata["domain"] == "STEM" and single.metadata["prompt_category"] == "physics"
    assert single.metadata["turncase"] == "single-turn"
    assert single.metadata["eval_focus"] == "region_switch_qa"
    assert [(r["id"], r["weight"], r["critical"]) for r in single.metadata["rubrics"][0]] == [
        ("r-1", 5, "yes"), ("r-2_01", 2, "yes")]

    assert len(multi.turns) == 3 and multi.metadata["turncase"] == "multi-turn"
    assert multi.metadata["domain"] == "finance"
    assert [[blobs.get(r) for r in t.images] for t in multi.turns] == [[BLUE, RED], [], [GREEN]]
    assert [t.reference for t in multi.turns] == ["March.", "July.", "Both peak in March."]
    assert [[r["id"] for r in turn] for turn in multi.metadata["rubrics"]] == [["m1"], ["m2", "m3"], ["m4"]]
    assert "python_image_processing" in multi.tools and len(multi.tools) == 6

    assert isinstance(bad, LoadError)
    assert bad_row in bad.message and "rubrics_by_turn[1]" in bad.message


def test_parquet_is_read_by_row_group_never_whole(tmp_path: Path, blobs: BlobStore,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_parquet(tmp_path / "test.parquet", sample_rows(), row_group_size=1)
    assert pq.ParquetFile(path).num_row_groups == 3

    def whole_file_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the whole parquet file must not be read at once")

    monkeypatch.setattr(pq.ParquetFile, "read", whole_file_read)
    monkeypatch.setattr(pq, "read_table", whole_file_read)
    items = list(iter_tasks(path, blobs))
    assert [i.task_id if isinstance(i, LoadError) else i.id for i in items] == [SINGLE_ID, MULTI_ID, BAD_ID]
    _check_tasks(items, blobs, "test.parquet row 2")


def test_dataset_json_export_gives_the_same_tasks(tmp_path: Path, blobs: BlobStore) -> None:
    data = write_dataset_json(tmp_path / "repo", sample_rows())
    items = list(iter_tasks(data, blobs))
    _check_tasks(items, blobs, "multi_turn/dataset.json row 1")
    parquet = list(iter_tasks(write_parquet(tmp_path / "test.parquet", sample_rows()), BlobStore(tmp_path / "b2")))
    as_tuple = {t.id: ([x.text for x in t.turns], [x.images for x in t.turns], t.metadata["rubrics"])
                for t in items if isinstance(t, Task)}
    assert as_tuple == {t.id: ([x.text for x in t.turns], [x.images for x in t.turns], t.metadata["rubrics"])
                        for t in parquet if isinstance(t, Task)}


def test_dataset_json_missing_image_names_the_field(tmp_path: Path, blobs: BlobStore) -> None:
    data = write_dataset_json(tmp_path / "repo", sample_rows()[:1])
    (data / "single_turn" / "images" / "sample_0" / "image_1.png").unlink()
    [err] = list(iter_tasks(data / "single_turn" / "dataset.json", blobs))
    assert isinstance(err, LoadError) and err.task_id == SINGLE_ID
    assert "row 0" in err.message and "image_paths[1]" in err.message


@pytest.mark.parametrize(("change", "field"), [
    ({"turn_golden_answers": ["only one"]}, "turn_golden_answers"),
    ({"rubrics_by_turn": [json.dumps({"x": rubric("d", 3)})]}, "rubrics_by_turn"),
    ({"turn_prompts": []}, "turn_prompts"),
])
def test_malformed_rows_become_load_errors(tmp_path: Path, blobs: BlobStore, change: dict[str, Any],
                                           field: str) -> None:
    good = sample_rows()[1]
    path = write_parquet(tmp_path / "t.parquet", [sample_rows()[0], {**good, **change}])
    items = list(iter_tasks(path, blobs))
    assert isinstance(items[0], Task)
    assert isinstance(items[1], LoadError) and items[1].task_id == MULTI_ID
    assert "row 1" in items[1].message and field in items[1].message


def test_rubric_weight_must_be_numeric(tmp_path: Path, blobs: BlobStore) -> None:
    bad = row("abc", "maths", "region_switch_qa", [
        {"prompt": "p", "golden": "g", "rubrics": {"w": {**rubric("d", 1), "weight": "heavy"}}, "images": [RED]}])
    [err] = list(iter_tasks(write_parquet(tmp_path / "t.parquet", [bad]), blobs))
    assert isinstance(err, LoadError) and "rubrics_by_turn[0].w.weight" in err.message


def test_suite_is_registered_and_honours_limit(tmp_path: Path, blobs: BlobStore) -> None:
    path = write_parquet(tmp_path / "test.parquet", sample_rows())
    suite = make_suite("visualtoolbench", {"path": str(tmp_path), "limit": 2}, blobs)
    assert isinstance(suite, VisualToolBenchSuite)
    assert [t.id for t in suite.load() if isinstance(t, Task)] == [SINGLE_ID, MULTI_ID]
    assert path.exists()


def test_rubric_weights_load_without_images(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "test.parquet", sample_rows()[:2])
    weights = load_rubric_weights(path)
    assert weights == {SINGLE_ID: [{"r-1": 5.0, "r-2_01": 2.0}],
                       MULTI_ID: [{"m1": 4.0}, {"m2": 5.0, "m3": 1.0}, {"m4": 3.0}]}
