"""The opt-in `model` cache namespace: a rerun replays model turns from the cache, keyed by seed."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import Sweep


def cfg_path(tmp: Path, modes: str) -> Path:
    p = tmp / f"sweep-{modes.replace('=', '_').replace(',', '-')}.yaml"
    p.write_text(yaml.safe_dump({
        "seeds": 2,
        "models": [{"name": "m", "provider": "sim", "policy": "tools"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [320, 240]}}],
        "run": {"cache": {"path": str(tmp / "cache.sqlite"), "modes": modes}}}))
    return p


async def test_model_turns_replay_from_cache_and_seeds_do_not_collide(tmp_path: Path) -> None:
    first = Sweep(load_config(cfg_path(tmp_path, "model=use")), RunOptions(run_dir=tmp_path / "a", progress=False))
    res = await first.run()
    requests = first.clients["m"].stats.requests
    assert res.ok == 12 and requests > 12 and first.clients["m"].stats.cache_hits == 0
    # a fresh run folder (as after losing one): every turn comes from the cache, none from the model
    second = Sweep(load_config(cfg_path(tmp_path, "model=use")), RunOptions(run_dir=tmp_path / "b", progress=False))
    await second.run()
    assert second.clients["m"].stats.requests == 0
    assert second.clients["m"].stats.cache_hits == requests
    a = sorted((r["job_id"], r["answer"]) for r in map(orjson.loads, (tmp_path / "a" / "records.jsonl").read_bytes().splitlines()))
    b = sorted((r["job_id"], r["answer"]) for r in map(orjson.loads, (tmp_path / "b" / "records.jsonl").read_bytes().splitlines()))
    assert a == b
    # replay mode with a cache that lacks a seed fails closed, naming the key, and loses nothing
    cfg = load_config(cfg_path(tmp_path, "model=replay"))
    cfg.raw["seeds"] = cfg.seeds = [7]
    replay = Sweep(cfg, RunOptions(run_dir=tmp_path / "c", progress=False))
    res = await replay.run()
    assert res.errors == 6 and replay.clients["m"].stats.requests == 0
    rec = orjson.loads((tmp_path / "c" / "records.jsonl").read_bytes().splitlines()[0])
    assert rec["error_kind"] == "cache_miss" and "model" in rec["error"]


def test_cached_response_keeps_reasoning_tokens_and_reads_older_entries() -> None:
    """A cache hit reports the reasoning tokens the model spent (they were lost with four counts)."""
    from fasteval.core.types import Usage
    from fasteval.services.cache_http import response_to_value, value_to_response
    from providers.base import ChatResponse

    resp = ChatResponse(content="ok", finish_reason="stop", tool_calls=[],
                        usage=Usage(100, 80, 10, 5, reasoning_tokens=64))
    stored = orjson.loads(orjson.dumps(response_to_value(resp)))  # as the SQLite cache holds it
    assert value_to_response(stored).usage == Usage(100, 80, 10, 5, 64)
    older = {**stored, "usage": [100, 80, 10, 5]}  # entries written before reasoning was kept
    assert value_to_response(older).usage == Usage(100, 80, 10, 5, 0)
    assert value_to_response({**stored, "usage": [3, 4]}).usage == Usage(3, 4)
