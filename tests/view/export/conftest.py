"""One real sweep every export test reads, built once per session with the real CLI.

It holds what each format must carry: task images and tool-returned crops (tir-synth's python
tool, V*'s zoom), native tool calls and DeepEyes' ``<tool_call>`` text protocol (V* under a
synthetic DeepEyes checkout), a two-turn task (the demo suite), error records (a sim that answers
HTTP 400), both scorers side by side (V*'s ``reference`` and ``fixed``) and a priced model (cost).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.view.sweep_fixture import run_cli

_TWI = Path(__file__).resolve().parents[2] / "suites" / "twi"


def _twi_module(name: str) -> ModuleType:
    """A helper of the twi suite tests (``releases``, ``protocol_checkouts``), loaded by path."""
    if str(_TWI) not in sys.path:  # they import each other by bare name
        sys.path.insert(0, str(_TWI))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _TWI / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def export_config(base: Path) -> dict[str, Any]:
    rel = _twi_module("releases")
    checkouts = _twi_module("protocol_checkouts")
    vstar = rel.vstar_folder(base / "vstar")
    return {
        "name": "export-test", "seeds": 2,
        "models": [
            {"name": "sim-oracle", "provider": "sim", "policy": "oracle", "price": {"input": 2.0, "output": 8.0}},
            {"name": "sim-flaky", "provider": "sim", "policy": "oracle", "faults": {"schedule": ["400", "400", "400"]}},
            {"name": "sim-tools", "provider": "sim", "policy": "tools", "tool_uses": 1, "default_reply": "B"},
        ],
        "suites": [
            {"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1, "types": ["visual_search", "spot_difference"]},
             "settings": [{"name": "tool"}]},
            {"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48], "multi_turn_every": 2},
             "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6}]},
            {"name": "vstar", "options": {"path": str(vstar),
                                          "deepeyes_repo": str(checkouts.deepeyes_checkout(base / "DeepEyes"))},
             "settings": [{"name": "zoom"},
                          {"name": "deepeyes", "extends": "zoom", "tools": [], "options": {"protocol": "deepeyes-text"}}]},
        ],
        "run": {"max_concurrency": 16, "fsync": "never", "sandbox": {"workers": 2}},
    }


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run folder (read-only by convention)."""
    base = tmp_path_factory.mktemp("export-run")
    cfg = base / "export.yaml"
    cfg.write_text(yaml.safe_dump(export_config(base)))
    run_dir = base / "run"
    proc = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress",
                   env={"FASTEVAL_CACHE_DIR": str(base / "cache")})
    assert proc.returncode == 1, proc.stderr[-2000:]  # some jobs in error, by design
    return run_dir

