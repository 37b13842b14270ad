"""The README's first recipe runs as written: ``data fetch`` from the loopback hub, then the run and
the report it names, in a folder laid out like a checkout (its configs/, the data/ beside them)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("readme_check", Path(__file__).parent / "readme_check.py")
assert _spec is not None and _spec.loader is not None
readme_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_check)


@pytest.mark.slow
def test_the_first_recipe_fetches_runs_and_reports(tmp_path: Path) -> None:
    commands = readme_check.first_recipe((ROOT / "README.md").read_text())
    assert commands[0] == "fasteval data fetch tirbench"
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    venv = Path(sys.executable).parent.parent  # the venv running the tests (the checkout's .venv)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "README.md").write_text((ROOT / "README.md").read_text())
    (checkout / ".venv").symlink_to(venv)
    results = readme_check.run_recipe(checkout, workdir=tmp_path)
    assert [code for _, code, _ in results] == [0] * len(commands), results[-1]
    assert (tmp_path / "data" / "TIR-Bench" / "fasteval.lock.json").is_file()
    assert "sim-tools" in results[-1][2]  # the report names the models it ran
