"""``fasteval merge`` says what it made: a merged run from a shard that did not finish says it is
partial and names the shard; sources of different configs are refused with the keys that differ,
not two hashes (#39 item 4)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.exitcodes import EXIT_USAGE


def _config(path: Path, n_tasks: int = 3) -> Path:
    path.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [32, 24]}}],
        "run": {"max_concurrency": 2, "fsync": "never"}}))
    return path


def test_a_merge_of_an_unfinished_shard_says_the_merged_run_is_partial(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path / "sweep.yaml", n_tasks=6)
    s0, s1 = tmp_path / "s0", tmp_path / "s1"
    assert main(["run", str(cfg), "--run-dir", str(s0), "--shard", "0/2", "--no-progress"]) == 0
    assert main(["run", str(cfg), "--run-dir", str(s1), "--shard", "1/2", "--no-progress", "--limit", "1"]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "merged"), str(s0), str(s1)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"{tmp_path / 'merged'}: ") and " records from 2 sources" in out.out, out
    assert "partial run: merged from sources that did not all finish" in out.err, out.err
    assert f"({s1}: " in out.err and "narrowed)" in out.err and str(s0) + ":" not in out.err, out.err
    assert main(["report", str(tmp_path / "merged")]) == 0
    assert capsys.readouterr().out.startswith("partial run: merged from sources")
    assert main(["merge", str(tmp_path / "whole"), str(s0), "--format", "json"]) == 0
    whole = orjson.loads(capsys.readouterr().out)
    assert whole["completion"]["complete"] is True and whole["sources"] == 1


def test_a_merge_of_two_configs_names_what_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(_config(tmp_path / "a.yaml", 1)), "--run-dir", str(a), "--no-progress"]) == 0
    assert main(["run", str(_config(tmp_path / "b.yaml", 2)), "--run-dir", str(b), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m"), str(a), str(b)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: the sources were run with different configs (against {a}):\n  {b}:\n"), err
    assert "    suites[0].options.n_tasks: 1 -> 2\n" in err, err
