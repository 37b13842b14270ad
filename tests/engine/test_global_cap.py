"""The sweep's global in-flight cap holds as seen by the server, below the endpoint's own window."""

from __future__ import annotations

from pathlib import Path

import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from providers.sim import SimModel, SimServer


async def test_server_never_sees_more_than_the_global_cap(tmp_path: Path) -> None:
    server = SimServer([SimModel("direct", policy="direct", latency_ms=15)])
    await server.start()
    try:
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(yaml.safe_dump({
            "seeds": 5,
            "models": [{"name": "m", "provider": "openai", "base_url": server.base_url, "model": "direct",
                        "limits": {"concurrency": 64}}],
            "suites": [{"name": "demo", "options": {"n_tasks": 8, "image_size": [160, 120]}}]}))
        res = await run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "run", max_concurrency=5,
                                                           progress=False))
    finally:
        await server.stop()
    assert res.ok == 80
    assert 2 <= server.max_in_flight <= 5
