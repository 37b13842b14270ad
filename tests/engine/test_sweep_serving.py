"""Served models inside a sweep: GPU scheduling, restarts, routing, exhaustion, checkpoint identity.

Every test runs the real ``fasteval`` CLI with the sim as the server binary (``serve.command``).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from fasteval.runfolder.index import open_index
from fasteval.view.report import status
from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    make_checkpoint,
    records,
    serve_block,
    state,
    write_config,
)


def run(config: Path, run_dir: Path, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", *extra),
                          capture_output=True, text=True, timeout=timeout, env=env())


def trajectories(log: Path) -> list[str]:
    return re.findall(r"sim-request traj=([0-9a-f]+)", log.read_text())


@pytest.mark.slow
def test_three_served_models_share_one_gpu_in_turn_while_an_api_model_runs(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": f"ck-{c}", "provider": "vllm", "serve": serve_block(ckpt)} for c in "abc"]
    models.append({"name": "api", "provider": "sim", "policy": "tools", "latency_ms": 20})
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, models, gpus=[0], n_tasks=5), run_dir)
    assert proc.returncode == 0, proc.stderr
    recs = records(run_dir)
    assert len(recs) == 20 and all(r["status"] == "ok" for r in recs)
    assert len({r["job_id"] for r in recs}) == 20
    spans = sorted((state(run_dir, f"ck-{c}-0")["started_at"], state(run_dir, f"ck-{c}-0")["stopped_at"]) for c in "abc")
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start, spans  # one GPU: a model starts only after the previous one stopped
    assert all(state(run_dir, f"ck-{c}-0")["gpus"] == ["0"] for c in "abc")
    order = [r["model"] for r in recs]
    last_model = max("abc", key=lambda c: state(run_dir, f"ck-{c}-0")["started_at"])
    # the API model does not wait for the GPU queue: its jobs finish before the last checkpoint's start
    assert max(i for i, m in enumerate(order) if m == "api") < min(i for i, m in enumerate(order)
                                                                   if m == f"ck-{last_model}")


@pytest.mark.slow
def test_sticky_routing_keeps_each_trajectory_on_one_replica_and_changed_weights_are_a_new_fingerprint(
        tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, "--log-requests", replicas=2)}]
    config = write_config(tmp_path, models, gpus=[0, 1], n_tasks=8)
    run_dir = tmp_path / "run"
    proc = run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    per_replica = [set(trajectories(run_dir / "servers" / f"ck-{i}.log")) for i in range(2)]
    assert per_replica[0] and per_replica[1], "both replicas got trajectories"
    assert not per_replica[0] & per_replica[1], "a trajectory's requests all reach one replica"
    assert len(per_replica[0] | per_replica[1]) == 8
    # the weights are retrained under the same path: a new fingerprint, so every job runs again
    # and the old records are kept aside (superseded), never counted beside the new ones
    (ckpt / "model.safetensors").write_bytes(b"\1" * 96)
    proc = run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "8 ok, 0 error, 0 already done" in proc.stderr
    assert "ck/demo/tools changed (model checkpoint:" in (run_dir / "run.log").read_text()
    st = status(run_dir)
    assert (st["done"], st["total"]) == (8, 8)
    with open_index(run_dir) as index:
        assert index.stats()["superseded"] == 8


@pytest.mark.slow
def test_a_server_that_dies_is_restarted_and_every_job_runs_exactly_once(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, "--die-after", "5", max_restarts=20)}]
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, models, gpus=[0], n_tasks=6), run_dir)
    assert proc.returncode == 0, proc.stderr
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * 6
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    st = state(run_dir, "ck-0")
    assert st["restarts"] >= 2 and st["state"] == "stopped"
    # a death under a request re-sent alone is charged to that request, not to the server's restarts
    assert (run_dir / "servers" / "ck-0.log").read_text().count("dying after 5 requests") >= st["restarts"]


@pytest.mark.slow
def test_a_dead_replica_moves_its_trajectories_to_the_other(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    # replica 0 dies at its 6th request and may not restart; replica 1 would only die after 105
    serve = serve_block(ckpt, "--log-requests", "--die-after", "{replica}05", replicas=2, max_restarts=0)
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, [{"name": "ck", "provider": "vllm", "serve": serve}], gpus=[0, 1], n_tasks=8),
               run_dir)
    assert proc.returncode == 0, proc.stderr
    recs = records(run_dir)
    assert len(recs) == 8 and all(r["status"] == "ok" for r in recs)
    assert "dying after 5 requests" in (run_dir / "servers" / "ck-0.log").read_text()
    assert state(run_dir, "ck-0")["restarts"] == 0
    moved = set(trajectories(run_dir / "servers" / "ck-0.log")) & set(trajectories(run_dir / "servers" / "ck-1.log"))
    assert moved, "the trajectories of the dead replica continued on the other one"


def test_exhausted_servers_leave_jobs_unrun_and_exit_3_after_other_work(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, "--die-after", "4", max_restarts=0)},
              {"name": "api", "provider": "sim", "policy": "tools"}]
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, models, gpus=[0], n_tasks=6), run_dir)
    assert proc.returncode == 3, proc.stderr
    assert "endpoint ck down (no server left" in proc.stderr and "jobs not run" in proc.stderr
    recs = records(run_dir)
    assert sum(r["model"] == "api" and r["status"] == "ok" for r in recs) == 6
    assert all(r["status"] == "ok" for r in recs), "no job errors because a server died"
    assert sum(r["model"] == "ck" for r in recs) < 6
    assert state(run_dir, "ck-0")["state"] == "failed"


def test_served_models_that_do_not_fit_are_refused_before_anything_runs(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "big", "provider": "vllm", "serve": serve_block(ckpt, tensor_parallel_size=2, replicas=2)}]
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, models, gpus=[0, 1]), run_dir)
    assert proc.returncode == 2
    assert "needs 4 GPU(s)" in proc.stderr and "2 GPU(s)" in proc.stderr
    assert not (run_dir / "manifest.json").exists()


@pytest.mark.slow
def test_a_served_role_stays_up_while_checkpoints_take_turns_on_the_other_gpu(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": f"ck-{c}", "provider": "vllm", "serve": serve_block(ckpt)} for c in "ab"]
    roles = {"judge": {"provider": "vllm", "serve": serve_block(make_checkpoint(tmp_path / "judge"))}}
    run_dir = tmp_path / "run"
    proc = run(write_config(tmp_path, models, gpus=[0, 1], n_tasks=3, roles=roles), run_dir)
    assert proc.returncode == 0, proc.stderr
    judge = state(run_dir, "judge-0")
    a, b = state(run_dir, "ck-a-0"), state(run_dir, "ck-b-0")
    assert judge["started_at"] <= a["started_at"] and judge["stopped_at"] >= b["stopped_at"]
    assert a["stopped_at"] <= b["started_at"]
    assert judge["gpus"] == ["0"] and a["gpus"] == b["gpus"] == ["1"]
    assert {r["model"] for r in records(run_dir)} == {"ck-a", "ck-b"}
