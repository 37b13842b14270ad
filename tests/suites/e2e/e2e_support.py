"""Shared steps of the end-to-end suite tests: fixture builders, the CLI in-process, record reading.

The suites' own fixture builders live in their test folders (some in a ``conftest.py``, which is
not importable by name under ``--import-mode=importlib``), so they are loaded here by file path
under unique module names.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.runfolder.records import latest_by_job

SUITES_TESTS = Path(__file__).resolve().parents[1]


def load_fixture_module(relative: str) -> ModuleType:
    """A test helper module of another suite folder, e.g. ``tirbench/conftest.py``."""
    name = "e2e_fixtures_" + re.sub(r"\W", "_", relative.removesuffix(".py"))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SUITES_TESTS / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_config(tmp: Path, cfg: dict[str, Any]) -> Path:
    """A sweep config in tmp, with the judge/extractor cache kept in tmp too."""
    cfg = {**cfg, "run": {"max_concurrency": 16, "fsync": "never", **(cfg.get("run") or {}),
                          "cache": {"path": str(tmp / "cache.sqlite")}}}
    path = tmp / f"{cfg['name']}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``fasteval ARGS`` in this process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        code = main(list(args))
    finally:
        for handler in root.handlers[:]:  # cmd_run adds a FileHandler on run.log and never removes it
            if handler not in before:
                root.removeHandler(handler)
                handler.close()
    out, err = capsys.readouterr()
    return code, out, err


def latest(run_dir: Path) -> list[dict[str, Any]]:
    recs = latest_by_job([run_dir / "records.jsonl"]).values()
    return sorted(recs, key=lambda r: (r["model"], r["setting"], r["task_id"], r["seed"]))


def line_count(run_dir: Path) -> int:
    return len((run_dir / "records.jsonl").read_bytes().splitlines())


def scores(recs: list[dict[str, Any]]) -> dict[str, float | None]:
    return {r["job_id"]: r["score"] for r in recs}


def run_summary(err: str) -> tuple[int, int, int, int]:
    """(ok, error, already done, of) from ``fasteval run``'s last stderr line."""
    m = re.search(r": (\d+) ok, (\d+) error, (\d+) already done \(of (\d+)\)", err)
    assert m, err
    return int(m[1]), int(m[2]), int(m[3]), int(m[4])


def judge_requests(err: str) -> tuple[int, int, int]:
    """(rescored, judge requests, judge cache hits) from ``fasteval rescore``'s stderr line."""
    m = re.search(r"rescored (\d+) ok, \d+ error, \d+ skipped; judge requests (\d+), judge cache hits (\d+)", err)
    assert m, err
    return int(m[1]), int(m[2]), int(m[3])


def report_rows(capsys: pytest.CaptureFixture[str], run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    code, out, _ = cli(capsys, "report", str(run_dir))  # the table, suite tables included
    assert code == 0 and "mean ± std" in out
    code, out, _ = cli(capsys, "report", str(run_dir), "--format", "json")
    assert code == 0
    return {(r["model"], r["suite"], r["setting"]): r for r in orjson.loads(out)["rows"]}


def resume_and_rescore(capsys: pytest.CaptureFixture[str], config: Path, run_dir: Path,
                       first: list[dict[str, Any]], expect_judged: bool = True) -> None:
    """The second half of every e2e test: a rerun adds nothing, rescoring changes nothing.

    A rerun with ``--keep-errors`` has zero jobs to run; ``fasteval rescore`` re-judges every ok
    record from the judge cache (the stderr line says ``judge requests 0``) and gives the same scores.
    """
    lines = line_count(run_dir)
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress", "--keep-errors")
    assert code == 0
    assert run_summary(err) == (0, 0, len(first), len(first))
    assert line_count(run_dir) == lines  # nothing appended

    code, _, err = cli(capsys, "rescore", str(run_dir))
    assert code == 0, err
    rescored, requests, hits = judge_requests(err)
    n_ok = sum(r["status"] == "ok" for r in first)
    assert rescored == n_ok and requests == 0
    assert hits > 0 if expect_judged else hits == 0
    after = latest(run_dir)
    assert scores(after) == scores(first)
    assert [r["status"] for r in after] == [r["status"] for r in first]
    assert line_count(run_dir) == lines + n_ok  # rescoring appends, never rewrites
