"""Every command tells a user's mistake from a bug of ours the way ``fasteval run`` does.

A mistake (malformed JSON in an option, an unknown name, a missing or malformed file, a damaged run
folder file) is raised as one of our UsageErrors where the input is parsed: one ``error:`` line and
exit 2. A KeyError or ValueError from our own code is an internal error: exit 70 with its traceback
(cli/main.py), never "fix your input". The bugs are planted where each command used to catch
ValueError/KeyError broadly and call them exit 2.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.exitcodes import EXIT_INTERNAL, EXIT_USAGE


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _usage(code: int, err: str, *words: str) -> None:
    assert code == EXIT_USAGE, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.startswith("error: ") or "\nerror: " in err or "refused" in err, err
    for w in words:
        assert w in err, (w, err)


def _bug(code: int, err: str, planted: str) -> None:
    assert code == EXIT_INTERNAL, err
    assert "Traceback" in err and planted in err and "internal error (a bug in fasteval)" in err, err


def _raises(exc: Exception) -> Callable[..., Any]:
    def bug(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return bug


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo run on the sim: what rescore, report and batches read."""
    tmp = tmp_path_factory.mktemp("run")
    cfg = tmp / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [32, 24]}}],
        "run": {"max_concurrency": 2, "fsync": "never"}}))
    assert main(["run", str(cfg), "--run-dir", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


# -- a user's mistake: exit 2, one line --------------------------------------------------------
def test_bad_json_in_an_option_is_a_usage_error_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           run_dir: Path) -> None:
    out = tmp_path / "o.json"
    out.write_text("{}")
    code, _, err = cli(capsys, "score-file", "--suite", "tirbench", str(out), "--options", "{not json")
    _usage(code, err, "--options is not valid JSON")  # was an uncaught JSONDecodeError: exit 70
    code, _, err = cli(capsys, "rescore", str(run_dir), "--judge", "[1, 2]")
    _usage(code, err, "--judge must be a JSON object")  # was dict([1, 2]): a TypeError, exit 70
    code, _, err = cli(capsys, "rescore", str(run_dir), "--judge", '{"model": "m"}')
    _usage(code, err, "--judge: a provider is required")
    code, _, err = cli(capsys, "suite", "prompts", "demo", "--options", "[]")
    _usage(code, err, "--options must be a JSON object")
    code, _, err = cli(capsys, "tool", "run", "calculator", "--args", "{oops")
    _usage(code, err, "--args is not valid JSON")


def test_unknown_names_and_missing_files_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "suite", "prompts", "nosuch")
    _usage(code, err, "unknown suite 'nosuch'", "demo")
    code, _, err = cli(capsys, "suite", "prompts", "demo", "--setting", "nosuch")
    _usage(code, err, "has no setting 'nosuch'")
    code, _, err = cli(capsys, "tool", "run", "nosuch_tool")
    _usage(code, err, "unknown tool 'nosuch_tool'")
    code, _, err = cli(capsys, "tool", "run", "image_zoom_in_tool", "--image", str(tmp_path / "missing.png"))
    _usage(code, err, "missing.png does not exist")
    code, _, err = cli(capsys, "data", "fetch", "nosuch")
    _usage(code, err, "unknown dataset 'nosuch'")
    code, _, err = cli(capsys, "score-file", "--suite", "nosuch", str(tmp_path / "x.json"))
    _usage(code, err, "unknown suite 'nosuch'")
    code, _, err = cli(capsys, "score-file", "--suite", "tirbench", str(tmp_path / "missing.json"))
    _usage(code, err, "missing.json: no such file")
    bad = tmp_path / "stats.json"
    bad.write_text('{"not": "a list"}')
    code, _, err = cli(capsys, "score-file", "--suite", "visualprobe", str(bad))
    _usage(code, err, "expected Mini-o3's stats.json")
    code, _, err = cli(capsys, "ctl", str(tmp_path), "set", "--model", "m", "rpm")
    _usage(code, err, "expected KEY=VALUE")
    code, _, err = cli(capsys, "slurm", "ctl", str(tmp_path), "status")
    _usage(code, err, "has no Slurm submission")


def test_damaged_run_folder_files_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  run_dir: Path) -> None:
    code, _, err = cli(capsys, "report", str(run_dir), "--leaderboard", "--sort", "nosuch")
    _usage(code, err, "--sort 'nosuch'")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_bytes(orjson.dumps({"config": {"suites": []}}))  # no models
    code, _, err = cli(capsys, "rescore", str(damaged), "--trust-manifest")
    _usage(code, err, "its config cannot be read")
    (damaged / "manifest.json").write_bytes(orjson.dumps({"config": {"models": [
        {"name": "b", "provider": "no-such-provider", "batch": {"max_requests": 10}}]}}))
    code, _, err = cli(capsys, "batches", "cancel", str(damaged), "--trust-manifest")
    _usage(code, err, "manifest.json", "unknown provider")
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_text("{torn")
    code, _, err = cli(capsys, "slurm", "ctl", str(tmp_path), "status")
    _usage(code, err, "jobs.json is not valid JSON")


# -- a bug of ours: exit 70 with its traceback ------------------------------------------------
def _config(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({"seeds": 1, "models": [{"name": "sim-direct", "provider": "sim"}],
                                    "suites": [{"name": "demo", "options": {"n_tasks": 2}}]}))
    return path


BUGS: list[tuple[str, str, Callable[[Path, Path], list[str]]]] = [
    # (module, attribute where the bug is planted, the command line given tmp and a finished run)
    ("fasteval.suites.base", "make_suite", lambda tmp, run: ["suite", "prompts", "demo"]),
    ("fasteval.suites.base", "score_output", lambda tmp, run: ["score-file", "--suite", "tirbench", str(tmp)]),
    ("fasteval.engine.run.toolrun", "run_tool_once", lambda tmp, run: ["tool", "run", "calculator"]),
    ("fasteval.suites.data_fetch", "fetch", lambda tmp, run: ["data", "fetch", "tirbench"]),
    ("fasteval.config.load", "load_config", lambda tmp, run: ["rescore", str(run), "--config", str(_config(tmp))]),
    ("fasteval.cli.ctl", "parse_values", lambda tmp, run: ["ctl", str(run), "set", "--model", "m", "rpm=1"]),
    ("fasteval.cli.slurm_ctl", "gather", lambda tmp, run: ["slurm", "ctl", str(run), "status"]),
    ("fasteval.cli.catalog", "_serve_placement", lambda tmp, run: ["config", "check", str(_config(tmp))]),
    ("fasteval.cli.leaderboard", "leaderboard", lambda tmp, run: ["report", str(run), "--leaderboard"]),
    ("fasteval.engine.offline.batch_admin", "manifest_specs",
     lambda tmp, run: ["batches", "cancel", str(run), "--trust-manifest"]),
    ("fasteval.engine.forecast.estimate", "estimate",
     lambda tmp, run: ["run", str(_config(tmp)), "--dry-run", "--estimate"]),
]


@pytest.mark.parametrize(("module", "attr", "argv"), BUGS, ids=[f"{m.rsplit('.', 1)[-1]}.{a}" for m, a, _ in BUGS])
@pytest.mark.parametrize("exc", [KeyError, ValueError])
def test_a_key_or_value_error_of_ours_is_an_internal_error_not_a_usage_error(
        module: str, attr: str, argv: Callable[[Path, Path], list[str]], exc: type[Exception], tmp_path: Path,
        run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    planted = f"planted-{attr}-bug"
    monkeypatch.setattr(importlib.import_module(module), attr, _raises(exc(planted)))
    code, _, err = cli(capsys, *argv(tmp_path, run_dir))
    _bug(code, err, planted)


def test_the_planted_bugs_are_where_the_commands_look(run_dir: Path) -> None:
    """The commands import these names at call time from these modules (so the plants above land)."""
    for module, attr, _ in BUGS:
        assert callable(getattr(importlib.import_module(module), attr)), (module, attr)
    assert json.loads((run_dir / "manifest.json").read_text())["config"]["models"][0]["name"] == "sim-direct"
