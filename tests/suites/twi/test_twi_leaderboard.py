"""The leaderboard of a real V* sweep shows both scorers' numbers: the reference rule's and ours."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import releases as rel

_SUPPORT = Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py"
_spec = importlib.util.spec_from_file_location("twi_e2e_support", _SUPPORT)
assert _spec is not None and _spec.loader is not None
support = sys.modules.get("twi_e2e_support") or importlib.util.module_from_spec(_spec)
if "twi_e2e_support" not in sys.modules:
    sys.modules["twi_e2e_support"] = support
    _spec.loader.exec_module(support)


def test_vstar_leaderboard_cell_has_fixed_and_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = support.write_config(tmp_path, {
        "name": "twi-board", "seeds": 2,
        "models": [{"name": "sim-a", "provider": "sim", "policy": "scripted", "script": [], "default_reply": "A"}],
        "suites": [{"name": "vstar", "options": {"path": str(rel.vstar_folder(tmp_path / "vstar"))},
                    "settings": [{"name": "direct"}]}]})
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    code, out, err = support.cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    code, out, err = support.cli(capsys, "report", str(run_dir), "--leaderboard", "--format", "json")
    assert code == 0, err
    [board_row] = json.loads(out)["rows"]
    cell = board_row["cells"]["vstar/direct"]
    metrics = row["suite_metrics"]
    assert (cell["fixed"], cell["reference"]) == (metrics["fixed"], metrics["reference"])
    assert (cell["fixed_std"], cell["reference_std"]) == (metrics["fixed_std"], metrics["reference_std"])
    assert cell["mean"] == row["mean"] and board_row["average"] == row["mean"]
    code, out, _ = support.cli(capsys, "report", str(run_dir), "--leaderboard", "--format", "markdown")
    assert code == 0 and f"fixed {100 * metrics['fixed']:.1f}" in out and f"ref {100 * metrics['reference']:.1f}" in out
