"""A sweep whose setting uses a python tool starts the sandbox pool service and runs model code in it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep


@pytest.mark.slow
async def test_python_tool_runs_in_the_pool_started_by_the_sweep(tmp_path: Path) -> None:
    data = tmp_path / "tasks.jsonl"
    data.write_bytes(orjson.dumps({"id": "p1", "prompt": "say hello", "answer": "x",
                                   "tools": ["python_image_processing"]}) + b"\n")
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 1}],
        "suites": [{"name": "jsonl", "options": {"path": str(data)}}],
        "run": {"sandbox": {"workers": 1}}}))
    res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", progress=False))
    assert res.ok == 1
    rec = orjson.loads((tmp_path / "run" / "records.jsonl").read_bytes())
    (call,) = rec["trajectory"]["tool_calls"]
    assert call["name"] == "python_image_processing" and call["status"] == "ok"
    assert orjson.loads(call["output"])["stdout"].strip() == "hello"


def _python_sweep(tmp_path: Path, sandbox: dict[str, object]) -> Path:
    data = tmp_path / "tasks.jsonl"
    data.write_bytes(orjson.dumps({"id": "p1", "prompt": "say hello", "answer": "x",
                                   "tools": ["python_image_processing"]}) + b"\n")
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 1}],
        "suites": [{"name": "jsonl", "options": {"path": str(data)}}], "run": {"sandbox": sandbox}}))
    return cfg


@pytest.mark.slow
async def test_run_sandbox_limits_reach_the_pool(tmp_path: Path) -> None:
    """``run.sandbox.limits`` sets the kernel-enforced limits of model code (here: its stdout cap)."""
    cfg = _python_sweep(tmp_path, {"workers": 1, "limits": {"output_chars": 3, "timeout_s": 20.0}})
    res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", progress=False))
    assert res.ok == 1
    (call,) = orjson.loads((tmp_path / "run" / "records.jsonl").read_bytes())["trajectory"]["tool_calls"]
    assert orjson.loads(call["output"])["stdout"].startswith("hel")
    assert "hello" not in orjson.loads(call["output"])["stdout"]


@pytest.mark.parametrize(("limits", "message"), [
    ({"timeout_s": 0}, "run.sandbox.limits.timeout_s: must be positive"),
    ({"memory_bytes": -1}, "run.sandbox.limits.memory_bytes: must be positive"),
    ({"memroy_bytes": 1}, "memroy_bytes"),
    ({"cpu_s": "lots"}, "cpu_s"),
    ({"pool_disk_bytes": 0}, "run.sandbox.limits.pool_disk_bytes: must be positive"),
])
def test_bad_sandbox_limits_are_config_errors(tmp_path: Path, limits: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_python_sweep(tmp_path, {"limits": limits}))
    assert message in str(e.value)
