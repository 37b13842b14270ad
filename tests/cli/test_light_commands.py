"""The light commands import only what they use (#39 item 11).

``fasteval --help``, ``list``, ``status`` and ``ctl`` (a control client the user runs while a sweep
works) used to import the sweep's config loader, planner, served-model supervisor, the sim server
and aiohttp: about a second each on a quiet 2-core machine. Each check runs in a fresh interpreter;
the time itself is measured by ``benchmarks/light_commands.py``, never asserted here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.cli.commands import COMMANDS
from fasteval.cli.main import build_parser, main

_PROBE = """
import json, sys
from fasteval.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as e:
    code = e.code
heavy = ("aiohttp", "uvloop", "asyncio", "numpy", "pyvips", "rich", "fasteval.config.load", "fasteval.engine",
         "fasteval.suites", "fasteval.view.data", "fasteval.slurm", "providers.sim.server", "providers.local")
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}), file=sys.stderr)
"""


def loaded(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, "-", *args], capture_output=True, text=True, timeout=120)
    out = orjson.loads(proc.stderr.strip().splitlines()[-1])
    return out["code"], out["loaded"]


def test_the_command_table_is_what_the_modules_register() -> None:
    """``--help`` lists the table; each module, imported, registers the same names with the same help."""
    full = build_parser(None)
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    listed = {c.dest: c.help for c in sub._choices_actions}
    assert list(listed) == [name for name, _, _ in COMMANDS]
    assert listed == {name: text for name, _, text in COMMANDS}
    light = build_parser("status")
    sub = next(a for a in light._actions if isinstance(a, argparse._SubParsersAction))
    assert [c.dest for c in sub._choices_actions] == [name for name, _, _ in COMMANDS]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("light")
    cfg = tmp / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 1, "image_size": [32, 24]}}]}))
    assert main(["run", str(cfg), "--run-dir", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


def test_help_list_status_and_ctl_import_no_sweep(run_dir: Path) -> None:
    assert loaded("--help") == (0, [])
    assert loaded("list", "policies") == (0, [])
    assert loaded("ctl", str(run_dir), "status") == (2, [])  # no sweep runs there: one line, exit 2
    code, modules = loaded("status", str(run_dir), "--format", "json")
    # rich is for tables; asyncio comes with runfolder.records' writer, beside read_manifest
    assert code == 0 and set(modules) <= {"asyncio"}, modules
    code, modules = loaded("status", str(run_dir))
    assert code == 0 and set(modules) <= {"asyncio", "rich"}, modules
