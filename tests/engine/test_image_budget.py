"""A model's image byte/pixel budget downsizes what is sent instead of failing the request."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pyvips
import yaml
from aiohttp import web

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep


async def test_images_are_downsized_to_the_models_budget(tmp_path: Path) -> None:
    sizes: list[tuple[int, int, int]] = []

    async def chat(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        for m in body["messages"]:
            for p in m["content"] if isinstance(m["content"], list) else []:
                if p["type"] == "image_url":
                    raw = base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
                    img = pyvips.Image.new_from_buffer(raw, "")
                    sizes.append((len(raw), img.width, img.height))
        return web.json_response({"choices": [{"message": {"content": "42"}, "finish_reason": "stop"}]})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(yaml.safe_dump({
            "models": [{"name": "small", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                        "max_image_bytes": 20_000, "max_image_pixels": 100_000}],
            "suites": [{"name": "demo", "options": {"n_tasks": 1, "image_size": [1024, 768]},
                        "settings": [{"name": "no-tools", "tools": []}]}]}))
        res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", progress=False))
    finally:
        await runner.cleanup()
    assert res.ok == 1
    (nbytes, w, h), = sizes
    assert nbytes <= 20_000 and w * h <= 100_000 and w < 1024
    rec = orjson.loads((tmp_path / "run" / "records.jsonl").read_bytes())
    assert rec["answer"] == "42"
