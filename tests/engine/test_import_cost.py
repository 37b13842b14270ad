"""Reading a run folder loads only what it uses: no HTTP client, no suites, no numpy without a CI.

Each check runs in a fresh interpreter (``sys.modules`` of this test process is long since full).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import orjson

from fasteval.core.types import Job
from fasteval.runfolder.records import read_manifest, write_manifest
from fasteval.suites.base import suites_with_tables
from tests.runfolder.index_support import make_record, manifest, write

_PROBE = """
import json, sys
from fasteval.cli.main import main
code = main(sys.argv[2:])
heavy = ("aiohttp", "numpy", "importlib.metadata", "fasteval.suites", "fasteval.config.load", "pyvips")
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}), file=sys.stderr)
"""


def _loaded(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, "-", *args], capture_output=True, text=True, timeout=120)
    out = orjson.loads(proc.stderr.strip().splitlines()[-1])
    assert out["code"] == 0, proc.stderr
    loaded: list[str] = out["loaded"]
    return loaded


async def _run(tmp_path: Path, n_tasks: int, declare: bool = True) -> Path:
    rng = random.Random(n_tasks)
    run_dir = tmp_path / f"run{n_tasks}"
    jobs = [Job(model="m", suite="jsonl", setting="default", task_id=f"t{t}", seed=s)
            for t in range(n_tasks) for s in range(2)]
    manifest(run_dir, jobs)
    if declare:
        write_manifest(run_dir, {**(read_manifest(run_dir) or {}), "suite_tables": suites_with_tables(["jsonl"])})
    await write(run_dir, [make_record(rng, j, ok=True) for j in jobs], None)
    return run_dir


async def test_status_and_report_load_no_http_client_suites_or_metadata(tmp_path: Path) -> None:
    one_task = await _run(tmp_path, 1)
    assert _loaded("status", str(one_task), "--format", "json") == []
    assert _loaded("report", str(one_task), "--format", "json") == []  # one task: no bootstrap, no numpy
    assert _loaded("report", str(await _run(tmp_path, 3)), "--format", "json") == ["numpy"]


async def test_a_run_without_the_manifest_key_asks_the_suites(tmp_path: Path) -> None:
    """Folders written before ``suite_tables`` existed fall back to importing the suites."""
    assert suites_with_tables(["jsonl", "vistahop", "no-such-suite"]) == ["vistahop"]
    assert "fasteval.suites" in _loaded("report", str(await _run(tmp_path, 1, declare=False)), "--format", "json")


def test_the_engine_imports_without_numpy() -> None:
    code = "import sys, fasteval.engine.run.sweep, fasteval.suites; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
