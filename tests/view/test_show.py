"""``fasteval show``: a trajectory in the terminal, its images saved as real files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fasteval.view.data import JobQuery, RunSet
from tests.view.sweep_fixture import run_cli


def test_show_prints_the_code_and_saves_the_images(demo_run: Path, tmp_path: Path) -> None:
    row = RunSet([demo_run]).jobs(JobQuery(model="sim-oracle", setting="tool", q="contrast"))["rows"][0]
    proc = run_cli("show", str(demo_run), row["job_id"], "--images", str(tmp_path / "imgs"))
    assert proc.returncode == 0, proc.stderr
    assert "python_image_processing" in proc.stdout and "PROCESSED_IMAGE_SAVE_PATH" in proc.stdout
    paths = re.findall(r"\[image\] (\S+\.png)", proc.stdout)
    assert paths, proc.stdout
    for p in set(paths):
        assert Path(p).read_bytes().startswith(b"\x89PNG")
    assert "answer:" in proc.stdout


@pytest.mark.slow
def test_show_by_task_picks_the_one_job_or_lists_the_choices(demo_run: Path, tmp_path: Path) -> None:
    task = "tir-synth-0-maze-000"
    one = run_cli("show", str(demo_run), "--task", task, "--model", "sim-guess", "--setting", "no-tool",
                  "--seed", "1", "--images", str(tmp_path))
    assert one.returncode == 0, one.stderr
    assert task in one.stdout
    many = run_cli("show", str(demo_run), "--task", task)
    assert many.returncode == 2 and "12 jobs match" in many.stderr


def test_show_unknown_job_is_a_usage_error(demo_run: Path) -> None:
    proc = run_cli("show", str(demo_run), "0" * 20)
    assert proc.returncode == 2 and "no job" in proc.stderr
