"""Loading the official release layout: good rows become tasks, malformed rows LoadErrors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.suites.tirbench.loader import load_tirbench


def _split(items: list[Task | LoadError]) -> tuple[dict[str, Task], dict[str, LoadError]]:
    tasks = {i.id: i for i in items if isinstance(i, Task)}
    errors = {i.task_id: i for i in items if isinstance(i, LoadError)}
    return tasks, errors


def test_good_rows_become_tasks_with_dataset_ids(release: Path, blobs: BlobStore) -> None:
    tasks, _ = _split(list(load_tirbench(release, blobs)))
    assert list(tasks) == ["101", "102", "103", "104", "105"]
    color = tasks["101"]
    assert color.turns[0].text.startswith("Which colour dominates?")
    assert color.reference == "D" and color.turns[0].reference == "D"
    assert color.metadata["task_type"] == "color" and color.metadata["row_index"] == 0
    png = (release / "data/color/1.png").read_bytes()
    assert color.turns[0].images == [hashlib.sha256(png).hexdigest()]
    assert blobs.get(color.turns[0].images[0]) == png


def test_second_image_older_field_names_and_number_answers(release: Path, blobs: BlobStore) -> None:
    tasks, _ = _split(list(load_tirbench(release, blobs)))
    assert len(tasks["103"].turns[0].images) == 2
    assert tasks["104"].metadata["task_type"] == "ocr"  # "category" instead of "task"
    assert tasks["104"].metadata["image_1"] == "data/ocr/60.jpg"
    assert tasks["102"].metadata["difficulty"] == 2
    assert tasks["105"].reference == "72" and tasks["105"].metadata["answer_type"] == 2


def test_malformed_rows_yield_load_errors_naming_row_and_field(release: Path, blobs: BlobStore) -> None:
    _, errors = _split(list(load_tirbench(release, blobs)))
    assert "row 5" in errors["106"].message and "image_1" in errors["106"].message
    assert "row 6" in errors["107"].message and "'task'" in errors["107"].message
    assert "meta_data.difficulty" in errors["108"].message
    assert "row 8" in errors["row-8"].message and "repeats row 0" in errors["row-8"].message
    assert "row 9" in errors["row-9"].message and "not an object" in errors["row-9"].message
    assert "'answer'" in errors["110"].message
    assert len(errors) == 6


def test_task_types_and_limit_filter_rows(release: Path, blobs: BlobStore) -> None:
    only = list(load_tirbench(release, blobs, task_types={"jigsaw"}))
    # A row that is not an object has no type to filter on, so it is still reported.
    assert [getattr(i, "id", getattr(i, "task_id", None)) for i in only] == ["102", "108", "row-9"]
    assert len(list(load_tirbench(release, blobs, limit=2))) == 2


def test_json_file_path_works_and_missing_file_raises(release: Path, blobs: BlobStore, tmp_path: Path) -> None:
    assert len(list(load_tirbench(release / "TIR-Bench.json", blobs))) == 11
    with pytest.raises(FileNotFoundError):
        list(load_tirbench(tmp_path / "nowhere", blobs))
    (tmp_path / "obj.json").write_text(json.dumps({"0": {}}))
    with pytest.raises(ValueError, match="JSON array"):
        list(load_tirbench(tmp_path / "obj.json", blobs))


def test_suite_is_registered_with_settings(release: Path, blobs: BlobStore) -> None:

    suite = make_suite("tirbench", {"path": str(release), "fidelity": "reference", "limit": 3}, blobs)
    assert len(list(suite.load())) == 3
    settings = {s.name: s for s in suite.default_settings()}
    assert settings["no-tool"].tools == [] and settings["tool"].tools == ["python_image_processing"]
    assert settings["rotation-fn-p3"].tools == ["rotate_image"]
    assert settings["rotation-code-p1"].tools == ["python_image_processing"]
    assert {s.fidelity for s in settings.values()} == {"reference"}
    assert len([n for n in settings if n.startswith("rotation-")]) == 6
    with pytest.raises(ValueError, match="fidelity"):
        make_suite("tirbench", {"path": str(release), "fidelity": "loose"}, blobs)
    with pytest.raises(ValueError, match="path"):
        make_suite("tirbench", {}, blobs)


def test_user_message_puts_text_first_and_rotation_prompts(release: Path, blobs: BlobStore) -> None:
    from fasteval.suites.tirbench import TIRBench

    suite = TIRBench({"path": str(release)}, blobs)
    task = next(t for t in suite.load() if isinstance(t, Task) and t.id == "103")
    settings = {s.name: s for s in suite.default_settings()}
    message = suite.user_message(task, 0, settings["no-tool"], Trajectory())
    assert [p["type"] for p in message["content"]] == ["text", "image", "image"]
    assert message["content"][0]["text"] == task.turns[0].text
    p3 = suite.user_message(task, 0, settings["rotation-fn-p3"], Trajectory())["content"][0]["text"]
    assert p3.startswith(task.turns[0].text) and "one by one" in p3 and "rotate_image" in p3
    p1 = suite.user_message(task, 0, settings["rotation-code-p1"], Trajectory())["content"][0]["text"]
    assert p1 == task.turns[0].text
    assert not suite.applies_to(task, settings["rotation-fn-p1"]) and suite.applies_to(task, settings["tool"])
