"""``fasteval run`` tells a bug of ours from a user's mistake: a KeyError or ValueError from our own
start-up is an internal error (exit 70, one line, traceback in run.log, run folder kept), while a
config the user can fix still exits 2 and claims no folder."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.exitcodes import EXIT_INTERNAL, EXIT_USAGE
from fasteval.engine.forecast import dry_run
from fasteval.engine.run import sweep


def _config(tmp: Path, **suite: Any) -> Path:
    cfg = {"seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [32, 24]}, **suite}],
           "run": {"max_concurrency": 2, "fsync": "never"}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    before = list(logging.getLogger().handlers)
    try:
        code = main(["run", *args, "--no-progress"])
    finally:
        for h in logging.getLogger().handlers[:]:
            if h not in before:
                logging.getLogger().removeHandler(h)
    return code, capsys.readouterr().err


def _planted(exc: Exception) -> Any:
    def bug(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return bug


@pytest.mark.parametrize(("where", "exc"), [
    ("load_suite", KeyError("planted-start-up-bug")),  # before the folder is claimed
    ("open_runtime", ValueError("planted-runtime-bug")),  # after the manifest is written
], ids=["load_suite-KeyError", "open_runtime-ValueError"])
def test_a_bug_in_our_start_up_is_an_internal_error_that_keeps_the_run_folder(
        where: str, exc: Exception, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, where, _planted(exc))
    run_dir = tmp_path / "run"
    code, err = _run(capsys, str(_config(tmp_path)), "--run-dir", str(run_dir))
    assert code == EXIT_INTERNAL, err
    assert "internal error" in err and type(exc).__name__ in err and "please report it" in err
    assert "Traceback" not in err and "usage" not in err
    assert run_dir.is_dir(), "the folder holds the traceback the user reports"
    log = (run_dir / "run.log").read_text()
    assert "Traceback" in log and str(exc.args[0]) in log and f"in {where}" not in err


def test_a_setting_the_suite_lacks_still_exits_2_and_claims_no_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    code, err = _run(capsys, str(_config(tmp_path)), "--run-dir", str(run_dir), "--setting", "nosuch")
    assert code == EXIT_USAGE, err
    assert "--setting nosuch: no such setting" in err and "internal error" not in err
    assert not run_dir.exists()


def test_a_suite_option_value_the_suite_refuses_is_a_config_error_not_a_bug(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "vstar").mkdir()
    cfg = _config(tmp_path)
    raw = yaml.safe_load(cfg.read_text())
    raw["suites"] = [{"name": "vstar", "options": {"path": str(tmp_path / "vstar"), "generation": "lmms-eval"}}]
    cfg.write_text(yaml.safe_dump(raw))
    run_dir = tmp_path / "run"
    code, err = _run(capsys, str(cfg), "--run-dir", str(run_dir))
    assert code == EXIT_USAGE, err
    assert "vstar: generation lmms-eval goes with scorer lmms-eval" in err and "internal error" not in err
    assert not run_dir.exists()


def test_the_same_config_runs_once_the_bug_is_gone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(sweep, "load_suite", _planted(KeyError("planted")))
        assert _run(capsys, str(_config(tmp_path)), "--run-dir", str(run_dir))[0] == EXIT_INTERNAL
    code, err = _run(capsys, str(_config(tmp_path)), "--run-dir", str(run_dir))
    assert code == 0, err
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 4  # 2 tasks × demo's 2 settings


@pytest.mark.parametrize("manifest", [b"{bad", b"[1, 2]"], ids=["not-json", "not-an-object"])
def test_a_damaged_manifest_is_the_run_folders_fault_not_ours(
        manifest: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_bytes(manifest)
    code, err = _run(capsys, str(_config(tmp_path)), "--run-dir", str(run_dir))
    assert code == EXIT_USAGE, err
    assert "manifest.json: not the manifest fasteval writes" in err and "new --run-dir" in err
    assert (run_dir / "manifest.json").read_bytes() == manifest, "a folder we did not create is never cleaned away"


def test_the_dry_run_tells_a_bug_from_a_mistake_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config = str(_config(tmp_path))
    code, err = _run(capsys, config, "--dry-run", "--setting", "nosuch")
    assert code == EXIT_USAGE and "--setting nosuch: no such setting" in err, err
    monkeypatch.setattr(dry_run, "load_suite", _planted(KeyError("planted-dry-run-bug")))
    code, err = _run(capsys, config, "--dry-run")
    assert code == EXIT_INTERNAL, err
    assert "planted-dry-run-bug" in err and "internal error (a bug in fasteval)" in err
