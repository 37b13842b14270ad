"""Generators are deterministic per seed and the suite loads well-formed tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.suites.tir_synth import GENERATORS, generate
from fasteval.suites.tirbench import classify_string


@pytest.mark.parametrize("task_type", sorted(GENERATORS))
def test_generator_gives_same_bytes_and_answer_for_a_seed(task_type: str) -> None:
    for index in range(3):
        a, b = generate(task_type, 5, index), generate(task_type, 5, index)
        assert a.images == b.images and a.answer == b.answer and a.prompt == b.prompt and a.meta == b.meta


@pytest.mark.parametrize("task_type", sorted(GENERATORS))
def test_seeds_and_indices_give_different_items(task_type: str) -> None:
    items = [generate(task_type, seed, i).images for seed in (0, 1) for i in range(3)]
    assert len({tuple(imgs) for imgs in items}) == len(items)


def test_suite_loads_tasks_with_type_reference_and_stable_ids(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    suite = make_suite("tir-synth", {"seed": 2, "n_per_type": 2}, blobs)
    tasks = [t for t in suite.load() if isinstance(t, Task)]
    again = [t for t in make_suite("tir-synth", {"seed": 2, "n_per_type": 2}, blobs).load() if isinstance(t, Task)]
    assert [t.id for t in tasks] == [t.id for t in again] and len(tasks) == 2 * len(GENERATORS)
    assert [t.turns[0].images for t in tasks] == [t.turns[0].images for t in again]
    for task in tasks:
        assert task.metadata["task_type"] in GENERATORS
        assert task.reference == task.turns[0].reference
        assert all(ref in blobs for ref in task.turns[0].images)
        kind = classify_string(task.reference)
        assert kind in (1, 2) or task.metadata["task_type"] in ("jigsaw", "spot_difference"), task.id
    assert [s.name for s in suite.default_settings()] == ["tool", "no-tool"]
    assert suite.default_settings()[0].tools == ["python_image_processing"]


def test_unknown_type_is_a_load_error_not_a_crash(tmp_path: Path) -> None:
    suite = make_suite("tir-synth", {"types": ["maze", "nope"], "n_per_type": 1}, BlobStore(tmp_path / "b"))
    items = list(suite.load())
    assert isinstance(items[0], Task) and isinstance(items[1], LoadError) and "nope" in items[1].message
