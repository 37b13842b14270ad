"""A sim server speaking the native APIs on loopback, and a sweep config pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import SweepResult, run_sweep
from providers.sim import SimModel, SimServer


@asynccontextmanager
async def native_sim(models: list[SimModel], keys: dict[str, str] | None = None) -> AsyncIterator[SimServer]:
    server = SimServer(models)
    server.api_keys = dict(keys or {})
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def root(server: SimServer) -> str:
    return f"http://{server.host}:{server.port}"


async def sweep(tmp_path: Path, config: dict[str, Any]) -> tuple[SweepResult, list[dict[str, Any]]]:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    res = await run_sweep(load_config(path), RunOptions(run_dir=tmp_path / "run", progress=False))
    records = [orjson.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()]
    return res, records


def demo_suite(n_tasks: int = 4) -> dict[str, Any]:
    """The grey-square demo: a crop returned as an image by a tool, then the calculator; every
    fourth task has a second user turn."""
    return {"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [320, 240]},
            "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6}]}
