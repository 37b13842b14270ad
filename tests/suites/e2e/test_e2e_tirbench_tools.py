"""TIR-Bench's ``tool`` and rotation settings end to end: agent loop, sandbox, a real model server.

The model is a scripted OpenAI-compatible server on 127.0.0.1 that calls the tools: in ``tool``
it sets a variable in one python call and reads it in the next (the interpreter is stateful per
trajectory, as the paper's hosted code interpreter was); in ``rotation-fn-p1`` it rotates the
image 90 degrees clockwise and answers. Extraction uses the reference texts of the fixture
reference repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import pyvips
import yaml
from aiohttp import web
from e2e_support import load_fixture_module

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep

tir = load_fixture_module("tirbench/conftest.py")

ROTATION_ROW = {"id": 201, "task": "rotation_game", "prompt": "Rotate the image clockwise by how many degrees "
                "to make it upright? A. 0 B. 90 C. 180 D. 270", "answer": "B", "image_1": "data/color/1.png",
                "image_2": None, "meta_data": {}}


def _call(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


@pytest.mark.slow
async def test_tool_and_rotation_settings_run_through_the_agent_loop_and_sandbox(tmp_path: Path) -> None:
    seen_images: list[tuple[int, int]] = []

    async def chat(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if "python_image_processing" in tools:
            steps = ["x = 41\nprint('set')", "print(x + 1)"]
            msg = (_call("python_image_processing", {"code": steps[len(results)]}, len(results))
                   if len(results) < 2 else {"role": "assistant", "content": f"Final: {results[-1]['content']}"})
        elif "rotate_image" in tools:
            if not results:
                msg = _call("rotate_image", {"angle": 90}, 0)
            else:
                for m in body["messages"][-1:]:
                    for p in m["content"] if isinstance(m["content"], list) else []:
                        if p["type"] == "image_url":
                            import base64

                            img = pyvips.Image.new_from_buffer(base64.b64decode(p["image_url"]["url"].split(",")[1]), "")
                            seen_images.append((img.width, img.height))
                msg = {"role": "assistant", "content": "Upright after 90 degrees clockwise: B"}
        else:
            msg = {"role": "assistant", "content": "A"}
        return web.json_response({"choices": [{"message": msg, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 5}})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    release = tir.write_release(tmp_path / "TIR-Bench", [tir.GOOD_ROWS[0], ROTATION_ROW])
    try:
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(yaml.safe_dump({
            "name": "tir-tools", "seeds": 1,
            "models": [{"name": "tooly", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1"}],
            "roles": {"extractor": {"provider": "sim", "policy": "scripted", "script": [
                {"match": "Final:", "reply": "D"}, {"match": "clockwise: B", "reply": "B"}], "default_reply": "Z"}},
            "suites": [{"name": "tirbench", "options": {"path": str(release), "fidelity": "reference"},
                        "settings": [{"name": "tool"}, {"name": "rotation-fn-p1"}]}],
            "run": {"sandbox": {"workers": 1}, "cache": {"path": str(tmp_path / "cache.sqlite")}}}))
        res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", progress=False))
    finally:
        await runner.cleanup()
    recs = {(r["setting"], r["task_id"]): r for r in map(orjson.loads, (tmp_path / "run" / "records.jsonl")
                                                         .read_bytes().splitlines())}
    assert res.errors == 0, [r.get("error") for r in recs.values()]
    # tool: both tasks; rotation-fn-p1: the rotation_game task only.
    assert set(recs) == {("tool", "101"), ("tool", "201"), ("rotation-fn-p1", "201")}
    calls = recs[("tool", "101")]["trajectory"]["tool_calls"]
    assert [c["status"] for c in calls] == ["ok", "ok"]
    assert json.loads(calls[1]["output"])["stdout"].strip() == "42"  # x survived from the first call
    assert recs[("tool", "101")]["score"] == 1.0  # extractor "D" == gold D
    rot = recs[("rotation-fn-p1", "201")]
    (call,) = rot["trajectory"]["tool_calls"]
    assert call["name"] == "rotate_image" and call["status"] == "ok" and "clockwise" in call["output"]
    assert rot["score"] == 1.0 and seen_images and seen_images[0][0] < seen_images[0][1]  # 40x24 turned upright
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    texts = manifest["texts"]["tirbench"]
    assert texts["mode"] == "reference" and texts["reference_commit"] == "0123456789abcdef0123456789abcdef01234567"
    demo = next(t for t in texts["texts"] if t["name"] == "demo.color")
    assert (demo["file"], demo["symbol"], len(demo["sha256"])) == ("demo_prompts.py", "demo_prompt_color", 64)
    from fasteval.view.report import report

    assert report(tmp_path / "run")["texts"] == {"tirbench": f"reference texts from {texts['reference_repo']} @ 0123456789ab"}
