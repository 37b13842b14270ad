"""Helpers for the ``fasteval ctl`` tests: a sweep running in this process, asked over its real socket."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import SweepResult, run_sweep
from fasteval.runfolder.control import CONTROL_SOCKET, ask


def write_config(tmp: Path, models: list[dict[str, Any]], *, n_tasks: int = 1, seeds: int = 1,
                 run: dict[str, Any] | None = None, tools: bool = True) -> Path:
    setting = {"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]} if tools else {"name": "no-tools"}
    suite: dict[str, Any] = {"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [160, 120]},
                             "settings": [setting]}
    cfg = {"seeds": seeds, "models": models, "suites": [suite], "run": {"fsync": "always", **(run or {})}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start(cfg: Path, run_dir: Path, **opts: Any) -> asyncio.Task[SweepResult]:
    return asyncio.create_task(run_sweep(load_config(cfg), RunOptions(run_dir=run_dir, progress=False, **opts)))


async def ctl(run_dir: Path, command: str, **fields: Any) -> dict[str, Any]:
    """One command over the socket, from a thread (the client is blocking, as the CLI's is)."""
    answer = await asyncio.to_thread(ask, run_dir, {"command": command, **fields})
    return answer


async def until(check: Any, what: str, timeout_s: float = 60.0) -> None:
    """Poll ``check()`` (sync or async) until true; the timeout only stops a hung test."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def socket_up(run_dir: Path, task: asyncio.Task[Any]) -> None:
    def up() -> bool:
        if task.done():
            task.result()
            raise AssertionError("the sweep ended before its control socket was seen")
        return (run_dir / CONTROL_SOCKET).exists()

    await until(up, "the control socket")


async def status(run_dir: Path) -> dict[str, Any]:
    answer = await ctl(run_dir, "status")
    assert answer["ok"], answer
    st: dict[str, Any] = answer["status"]
    return st


def records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
