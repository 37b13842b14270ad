"""Sticky routing with images over 2 real vLLM replicas (the CPU build) serving the tiny zooming VLM.

One ``fasteval run`` with two served models on the same checkpoint and the same zoom tasks (an
image in the first message, crops coming back in tool messages): ``sticky`` first, then
``round_robin`` once its servers have stopped (a CPU node has cores for one of them at a time).
The prefix-cache hit rate is read twice: from vLLM's own counters, which each replica's state
file keeps as it stops, and from the records (the cached prompt tokens vLLM reports per request
with ``--enable-prompt-tokens-details``), as ``fasteval report`` shows it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.vllm.conftest import env, fasteval, mark_tasks, records, vlm_serve_block

POLICIES = ("sticky", "round_robin")


def counters(run_dir: Path, model: str) -> dict[str, int]:
    """vLLM's prefix-cache counters summed over the model's replicas, as each stood when it stopped."""
    kept = [orjson.loads((run_dir / "servers" / f"{model}-{i}.json").read_bytes()).get("prefix_cache")
            for i in range(2)]
    assert all(kept), f"{model}: every replica keeps its counters as it stops ({kept})"
    return {k: sum(int(c[k]) for c in kept if c) for k in ("queries", "hits")}


def usage_totals(recs: list[dict[str, Any]]) -> dict[str, int]:
    return {"queries": sum(r["usage"]["prompt_tokens"] for r in recs),
            "hits": sum(r["usage"].get("cache_read_tokens", 0) for r in recs)}


def test_sticky_routing_keeps_image_prefixes_cached_counters_and_records_agree(
        tmp_path: Path, vllm: str, vlm_checkpoint: Path) -> None:
    # an odd number: were the rounds to come back in lockstep, round robin could not still send
    # every trajectory's second round to the replica of its first (with 8 it could, by chance)
    tasks = mark_tasks(tmp_path, 7, seed=5)
    (tmp_path / "tasks.jsonl").write_text("".join(orjson.dumps(t).decode() + "\n" for t in tasks))
    models = [{"name": policy, "provider": "vllm", "tool_message_images": True,
               "params": {"temperature": 0.0, "max_tokens": 96},
               "serve": vlm_serve_block(vlm_checkpoint, vllm, images=4, replicas=2, routing=policy)}
              for policy in POLICIES]
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({
        "seeds": 1, "models": models, "run": {"max_concurrency": 8},
        "suites": [{"name": "jsonl", "options": {"path": str(tmp_path / "tasks.jsonl"), "max_rounds": 3}}]}))
    run_dir = tmp_path / "run"
    done = subprocess.run(fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress"),
                          capture_output=True, text=True, timeout=1800, env=env())
    assert done.returncode in (0, 1), done.stderr
    recs = records(run_dir)
    assert len(recs) == 2 * len(tasks) and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    report = subprocess.run(fasteval("report", str(run_dir), "--format", "json"), capture_output=True, text=True,
                            timeout=120, env=env())
    assert report.returncode == 0, report.stderr
    from_records = {row["model"]: row["prefix_cache_hit_rate"] for row in orjson.loads(report.stdout)["rows"]}
    rates: dict[str, float] = {}
    for policy in POLICIES:
        mine = [r for r in recs if r["model"] == policy]
        multi = [r for r in mine if r["rounds"] >= 2 and r["trajectory"]["tool_calls"]]
        assert len(multi) >= 4, f"{policy}: the checkpoint zoomed in {len(multi)} of {len(mine)} tasks"
        # every prompt token vLLM looked up and every one it found in its cache is on a record
        kept = counters(run_dir, policy)
        assert usage_totals(mine) == kept, (policy, usage_totals(mine), kept)
        rates[policy] = kept["hits"] / kept["queries"]
        assert from_records[policy] == round(rates[policy], 4), (policy, from_records[policy], rates[policy])
    print("prefix-cache hit rate with images (vLLM's counters = the records'): "
          + ", ".join(f"{p} {rates[p]:.1%}" for p in POLICIES))
    # round robin sends a trajectory's next round to the other replica half the time, where its
    # image and history are not cached; sticky keeps all of them where they were computed
    assert rates["sticky"] > rates["round_robin"], rates
