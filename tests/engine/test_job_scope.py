"""Whatever ends a job, it gives back what it held: its sandbox session and its in-flight count.

Each case runs a real sweep with a real sandbox pool (a stateful python tool opens a session per
trajectory) and ends the one job a different way: an answer, a provider error, our own bug in
the scorer, cancellation (Ctrl-C), its endpoint going down. The pool's ``release`` is observed
(not replaced) to see that the job's session was ended before the pool closed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import Sweep, SweepIncomplete
from fasteval.suites.jsonl import JsonlSuite
from providers.breaker import EndpointDown
from sandbox import SandboxPool


def _config(tmp_path: Path, faults: list[str] | None = None) -> Path:
    data = tmp_path / "tasks.jsonl"
    data.write_bytes(orjson.dumps({"id": "p1", "prompt": "say hello", "answer": "x",
                                   "tools": ["python_interpreter"]}) + b"\n")
    cfg = tmp_path / "sweep.yaml"
    model: dict[str, Any] = {"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 1}
    if faults:
        model["faults"] = {"schedule": faults}
    cfg.write_text(yaml.safe_dump({
        "models": [model],
        "suites": [{"name": "jsonl", "options": {"path": str(data)}, "settings": [
            {"name": "default", "tools": ["python_interpreter"], "max_rounds": 3,
             "options": {"tool_options": {"python_interpreter": {"stateful": True}}}}]}],
        "run": {"sandbox": {"workers": 1}, "fsync": "never"}}))
    return cfg


async def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: list[str] | None = None,
               score: Any = None) -> tuple[Sweep, list[str], list[dict[str, Any]]]:
    released: list[str] = []
    real_release = SandboxPool.release

    async def observed(self: SandboxPool, session_id: str) -> None:
        had = session_id in self._session_slot
        await real_release(self, session_id)
        if had:
            released.append(session_id)

    monkeypatch.setattr(SandboxPool, "release", observed)
    if score is not None:
        monkeypatch.setattr(JsonlSuite, "score", score)
    sweep = Sweep(load_config(_config(tmp_path, faults)), RunOptions(run_dir=tmp_path / "run", progress=False))
    try:
        await sweep.run()
    except SweepIncomplete:  # the endpoint-down case: the job is left for a rerun
        pass
    lines = (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()
    return sweep, released, [orjson.loads(x) for x in lines]


async def test_an_answered_job_releases_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, released, recs = await _run(tmp_path, monkeypatch)
    assert [r["status"] for r in recs] == ["ok"] and len(released) == 1
    assert sweep.ledger.in_flight == 0


async def test_a_provider_error_releases_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, released, recs = await _run(tmp_path, monkeypatch, faults=["ok", "400"])
    assert [r["error_kind"] for r in recs] == ["fatal"] and len(released) == 1
    assert sweep.ledger.in_flight == 0


async def test_an_internal_error_releases_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the scorer")

    sweep, released, recs = await _run(tmp_path, monkeypatch, score=broken)
    assert [r["error_kind"] for r in recs] == ["internal"] and len(released) == 1
    assert sweep.ledger.in_flight == 0


async def test_a_cancelled_job_releases_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder: list[Sweep] = []
    real_init = Sweep.__init__

    def keep(self: Sweep, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        holder.append(self)

    monkeypatch.setattr(Sweep, "__init__", keep)

    async def interrupted(*args: Any) -> Any:
        holder[0]._stop.set()  # what Ctrl-C does
        await asyncio.sleep(3600)

    sweep, released, recs = await _run(tmp_path, monkeypatch, score=interrupted)
    assert recs == [] and len(released) == 1  # not recorded (a rerun runs it), session gone
    assert sweep.ledger.in_flight == 0


async def test_an_endpoint_down_releases_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def down(*args: Any) -> Any:
        raise EndpointDown("sim", "gone")

    sweep, released, recs = await _run(tmp_path, monkeypatch, score=down)
    assert recs == [] and len(released) == 1
    assert sweep.ledger.in_flight == 0
