"""VisualToolBench's reference behaviours through ``fasteval run``: a real model server calls the
python tool on a multi-turn task, and the sandbox shows it the current turn's image only under
``reference`` (every image shown so far under ``fixed``); the tool entry it is sent is the
reference's (fixture repository) and lists the real input file names, rebuilt every round.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web
from e2e_support import load_fixture_module

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep

vtb = load_fixture_module("visualtoolbench/vtb_fixtures.py")

CODE = ("import os\nnames = [f for f in os.listdir('.') if f.startswith('input_')]\nnames.sort()\n"
        "print(names, [tuple(int(v) for v in cv2.imread(n)[0, 0][::-1]) for n in names])")
"""Lists the inputs the tool sees and their top-left RGB (only the reference's restricted builtins)."""


@pytest.mark.slow
@pytest.mark.parametrize("fidelity", ["reference", "fixed"])
async def test_multi_turn_tools_see_this_turns_image_under_reference(tmp_path: Path, fidelity: str) -> None:
    bodies: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        bodies.append(body)
        last = body["messages"][-1]
        if body.get("tools") and last["role"] == "user" and not str(last.get("content")).count("transformed"):
            msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"c{len(bodies)}", "type": "function",
                "function": {"name": "python_image_processing", "arguments": json.dumps({"code": CODE})}}]}
        else:
            msg = {"role": "assistant", "content": "done"}
        return web.json_response({"choices": [{"message": msg, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 5}})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    data = vtb.write_parquet(tmp_path / "test.parquet", vtb.sample_rows()[1:2])  # the three-turn task
    try:
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(yaml.safe_dump({
            "name": "vtb-ref", "seeds": 1,
            "models": [{"name": "tooly", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1"}],
            "roles": {"judge": {"provider": "sim", "policy": "scripted", "script": [],
                                "default_reply": '{"explanation": "x", "judge_result": "Met"}'}},
            "suites": [{"name": "visualtoolbench", "options": {"path": str(data), "fidelity": fidelity},
                        "settings": [{"name": "py", "extends": "with-tool", "tools": ["python_image_processing"]}]}],
            "run": {"sandbox": {"workers": 1}, "cache": {"path": str(tmp_path / "cache.sqlite")}}}))
        res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", progress=False))
    finally:
        await runner.cleanup()
    (rec,) = map(orjson.loads, (tmp_path / "run" / "records.jsonl").read_bytes().splitlines())
    assert res.errors == 0, rec.get("error")
    calls = rec["trajectory"]["tool_calls"]
    assert [c["turn"] for c in calls] == [0, 1, 2] and all(c["status"] == "ok" for c in calls), [c["output"] for c in calls]
    seen = [json.loads(c["output"])["stdout"].strip() for c in calls]
    described = [next(t["function"]["description"] for t in b["tools"]) for b in bodies if b.get("tools")]
    if fidelity == "reference":
        # turn 0 shows its first image (blue); turn 1 has none; turn 2 shows green as input_0.
        assert seen == ["['input_0.png'] [(0, 0, 255)]", "[] []", "['input_0.png'] [(0, 255, 0)]"]
        assert described[0].startswith("SYNTH image tool.\nfiles: ['input_0.png']; save to ")
        assert any(d.startswith("SYNTH image tool.\nfiles: []") for d in described)
    else:
        assert seen[0] == "['input_0.png', 'input_1.png'] [(0, 0, 255), (255, 0, 0)]"
        assert seen[2] == ("['input_0.png', 'input_1.png', 'input_2.png'] [(0, 0, 255), (255, 0, 0), (0, 255, 0)]")
        assert "input_2.png" in described[-1] and "SYNTH" not in described[-1]
