"""Helpers for the local-serving tests: the sim as the server binary, config files, process checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from providers.local.launcher import group_members


def sim_command(*extra: str) -> list[str]:
    return ["{python}", "-m", "providers.sim", "--port", "{port}", "--model", "{served_model_name}:tools", *extra]


def serve_block(ckpt: Path, *extra: str, **fields: Any) -> dict[str, Any]:
    return {"model": str(ckpt), "command": sim_command(*extra), "startup_timeout_s": 30,
            "restart_backoff_s": 0.2, "health_interval_s": 0.5, "stop_timeout_s": 5, **fields}


def make_checkpoint(path: Path, marker: str = "1") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(orjson.dumps({"model_type": "tiny", "marker": marker}).decode())
    (path / "model.safetensors").write_bytes(b"\0" * 64)
    return path


def write_config(tmp: Path, models: list[dict[str, Any]], *, gpus: list[int], n_tasks: int = 6,
                 roles: dict[str, Any] | None = None) -> Path:
    cfg: dict[str, Any] = {
        "seeds": 1, "models": models,
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "seed": 0},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6}]}],
        "run": {"gpus": gpus, "max_concurrency": 32},
    }
    if roles:
        cfg["roles"] = roles
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def state(run_dir: Path, label: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((run_dir / "servers" / f"{label}.json").read_bytes())
    return doc


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "records.jsonl").read_bytes().splitlines() if line.strip()]


def gone_within(pgid: int, seconds: float) -> bool:
    """True once no process of the group is left (zombies excluded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return True
        time.sleep(0.1)
    return False


def fasteval_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "fasteval.cli.main", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
