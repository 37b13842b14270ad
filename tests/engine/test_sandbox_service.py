"""A sweep whose setting uses a python tool starts the sandbox pool service and runs model code in it."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.engine.sweep import RunOptions, run_sweep


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
