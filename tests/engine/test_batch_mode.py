"""Batch mode end to end against the sim's batch APIs: tool loops with images, identical results
to an interactive run, expired batches, limits, per-request errors, and config refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import Sweep, run_sweep
from fasteval.runfolder.batch_journal import BatchJournal


def sim_model(wire: str, *, batch: Any = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": f"sim-{wire}", "provider": "sim", "policy": "tools", "wire": wire,
                         "batch_api": {"turnaround_s": 0.05}, **extra}
    if batch is not None:
        m["batch"] = batch
    return m


def write_config(tmp: Path, model: dict[str, Any], *, n_tasks: int = 4, seeds: int = 2, name: str = "sweep") -> Path:
    cfg = {"seeds": seeds, "models": [model],
           "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [160, 120]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
           "run": {"max_concurrency": 64, "fsync": "always"}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


FAST = {"gather_s": 0.05, "poll_s": 0.05}


def records(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    out = {}
    for line in (run_dir / "records.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        out[(r["task_id"], r["seed"])] = r
    return out


def same_results(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("status", "answer", "score", "rounds", "tool_calls", "termination")
    return all(a[k] == b[k] for k in keys)


async def sweep(cfg_path: Path, run_dir: Path, **opts: Any) -> tuple[Any, Sweep]:
    s = Sweep(load_config(cfg_path), RunOptions(run_dir=run_dir, progress=False, **opts))
    return await s.run(), s


@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic", "gemini"])
async def test_tool_loop_with_images_through_batches_matches_an_interactive_run(tmp_path: Path, wire: str) -> None:
    inter = await run_sweep(load_config(write_config(tmp_path, sim_model(wire), name="i")),
                            RunOptions(run_dir=tmp_path / "inter", progress=False))
    res, s = await sweep(write_config(tmp_path, sim_model(wire, batch=FAST), name="b"), tmp_path / "batch")
    assert res.ok == inter.ok == 8 and res.errors == 0
    a, b = records(tmp_path / "inter"), records(tmp_path / "batch")
    assert a.keys() == b.keys()
    assert all(same_results(a[k], b[k]) for k in a)
    assert all(r["rounds"] >= 2 and r["metadata"]["batch_id"] for r in b.values())  # tool rounds rode in batches
    journal = BatchJournal(tmp_path / "batch")
    assert len(journal.batches) >= 2  # one batch per round at least
    assert all(b.ended in ("completed", "ended", "BATCH_STATE_SUCCEEDED") for b in journal.batches.values())
    sent = [cid for jb in journal.batches.values() for cid in jb.ids]
    assert len(sent) == len(set(sent))  # no request submitted twice
    assert sum(r["usage"]["prompt_tokens"] for r in b.values()) > 0


async def test_an_expired_batch_is_resubmitted_and_the_run_finishes(tmp_path: Path) -> None:
    model = sim_model("openai", batch=FAST, batch_api={"turnaround_s": 0.05, "expire": 1})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=3, seeds=1), tmp_path / "run")
    assert res.ok == 3 and res.errors == 0
    journal = BatchJournal(tmp_path / "run")
    assert [b.ended for b in journal.batches.values()][0] == "expired"
    first = next(iter(journal.batches.values()))
    assert all(len(journal.requests[c].batches) == 2 for c in first.ids)  # each expired request: once more


async def test_a_gemini_batch_expired_as_a_whole_is_resubmitted(tmp_path: Path) -> None:
    model = sim_model("gemini", batch=FAST, batch_api={"turnaround_s": 0.05, "expire": 1})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=2, seeds=1), tmp_path / "run")
    assert res.ok == 2
    journal = BatchJournal(tmp_path / "run")
    assert next(iter(journal.batches.values())).ended == "BATCH_STATE_EXPIRED"


async def test_gemini_per_request_errors_are_matched_by_order(tmp_path: Path) -> None:
    model = sim_model("gemini", batch={**FAST, "gather_s": 0.3}, policy="direct", faults={"schedule": ["ok", "400"]})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=3, seeds=1), tmp_path / "run")
    assert (res.ok, res.errors) == (2, 1)
    journal = BatchJournal(tmp_path / "run")
    first = next(iter(journal.batches.values()))
    assert [journal.requests[c].kind for c in first.ids][:2] == [None, "fatal"]  # the second request's error


async def test_anthropic_expired_requests_in_an_ended_batch_are_resubmitted(tmp_path: Path) -> None:
    model = sim_model("anthropic", batch=FAST, batch_api={"turnaround_s": 0.05, "expire": 1})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=2, seeds=1), tmp_path / "run")
    assert res.ok == 2
    journal = BatchJournal(tmp_path / "run")
    assert next(iter(journal.batches.values())).ended == "ended"  # the batch ends; its requests expired


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_a_batch_larger_than_the_limits_is_split(tmp_path: Path, wire: str) -> None:
    model = sim_model(wire, batch={**FAST, "max_requests": 3, "gather_s": 0.3}, policy="direct")
    res, s = await sweep(write_config(tmp_path, model, n_tasks=5, seeds=2), tmp_path / "run")
    assert res.ok == 10
    journal = BatchJournal(tmp_path / "run")
    sizes = [len(b.ids) for b in journal.batches.values()]
    assert max(sizes) <= 3 and sum(sizes) == len(journal.requests) >= 10 and len(sizes) >= 4


async def test_bytes_split_a_batch_of_image_requests(tmp_path: Path) -> None:
    model = sim_model("openai", batch={**FAST, "max_mb": 0.05, "gather_s": 0.3}, policy="direct")
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=4, seeds=1), tmp_path / "run")
    assert res.ok == 4
    journal = BatchJournal(tmp_path / "run")
    for jb in journal.batches.values():
        assert (journal.dir / f"{jb.local}.jsonl").stat().st_size <= 0.05 * 1024 * 1024
    assert len(journal.batches) >= 2


async def test_a_request_over_the_byte_limit_fails_as_bad_input(tmp_path: Path) -> None:
    model = sim_model("openai", batch={**FAST, "max_mb": 0.001}, policy="direct")
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=1, seeds=1), tmp_path / "run")
    assert res.errors == 1
    rec = next(iter(records(tmp_path / "run").values()))
    assert rec["error_kind"] == "bad_input" and "batch limit" in rec["error"]


async def test_per_request_errors_a_400_fails_its_job_a_500_is_resubmitted(tmp_path: Path) -> None:
    model = sim_model("openai", batch=FAST, policy="direct", faults={"schedule": ["400", "500"]})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=3, seeds=1), tmp_path / "run")
    assert (res.ok, res.errors) == (2, 1)
    bad = [r for r in records(tmp_path / "run").values() if r["status"] == "error"]
    assert bad[0]["error_kind"] == "fatal"
    journal = BatchJournal(tmp_path / "run")
    tries = sorted(len(st.batches) for st in journal.requests.values())
    assert tries == [1, 1, 2]  # the 400 was not resubmitted, the 500 once


async def test_anthropic_validates_while_processing_a_malformed_request_errors_late(tmp_path: Path) -> None:
    # a thinking budget under the API's minimum is accepted at create and rejected per request
    model = sim_model("anthropic", batch=FAST, policy="direct", thinking_budget=500)
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=2, seeds=1), tmp_path / "run")
    assert res.errors == 2
    rec = next(iter(records(tmp_path / "run").values()))
    assert rec["error_kind"] == "fatal" and "budget_tokens" in rec["error"]


def config_error(tmp: Path, model: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp, model))
    return str(info.value)


def test_batch_is_refused_for_endpoints_without_a_batch_api(tmp_path: Path) -> None:
    vllm = {"name": "m", "provider": "vllm", "base_url": "http://127.0.0.1:1/v1", "batch": True}
    assert "provider vllm has no batch API" in config_error(tmp_path, vllm)
    served = {"name": "m", "provider": "openai", "serve": {"checkpoint": "/x"}, "batch": True}
    assert "has no batch API" in config_error(tmp_path, served)
    assert "unknown keys ['gather']" in config_error(tmp_path, sim_model("openai", batch={"gather": 1}))
    assert "positive number" in config_error(tmp_path, sim_model("openai", batch={"poll_s": 0}))
    for wire in ("openai", "anthropic", "gemini"):
        load_config(write_config(tmp_path, sim_model(wire, batch=True)))


async def test_a_batched_judge_role_scores_through_batches(tmp_path: Path) -> None:
    import tests.engine.test_rescore  # noqa: F401  (registers the test-judged suite)

    cfg = {"seeds": 2, "models": [{"name": "m", "provider": "sim", "policy": "direct", "default_reply": "an answer"}],
           "roles": {"judge": {"provider": "sim", "policy": "scripted", "script": [{"match": "Task q[02]", "reply": "YES"}],
                               "default_reply": "NO", "batch": FAST, "batch_api": {"turnaround_s": 0.02}}},
           "suites": [{"name": "test-judged"}]}
    path = tmp_path / "judged.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = await run_sweep(load_config(path), RunOptions(run_dir=tmp_path / "run", progress=False))
    assert res.ok == 8
    recs = records(tmp_path / "run")
    assert sorted(r["score"] for r in recs.values()) == [0.0] * 4 + [1.0] * 4
    # one judge request per task (the judge cache answers the second seed): each rode in a batch
    assert sum(1 for r in recs.values() if r["metadata"].get("batch_id")) >= 4
    journal = BatchJournal(tmp_path / "run")
    assert {b.lane for b in journal.batches.values()} == {"judge"} and len(journal.requests) == 4
