"""``fasteval run`` with ``serve:`` against real vLLM servers (the CPU build), end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson

from providers.local.launcher import group_members
from providers.local.routing import parse_metrics
from tests.vllm.conftest import (
    calculator_tasks,
    env,
    fasteval,
    records,
    serve_block,
    wait_for,
    write_sweep,
)


def states(run_dir: Path, labels: list[str]) -> list[dict[str, object]]:
    out = []
    for label in labels:
        path = run_dir / "servers" / f"{label}.json"
        if path.exists():
            out.append(orjson.loads(path.read_bytes()))
    return out


def test_two_cpu_replicas_sticky_tool_rounds_kill_9_and_an_exact_resume(tmp_path: Path, vllm: str,
                                                                         checkpoint: Path) -> None:
    config = write_sweep(tmp_path, serve_block(checkpoint, vllm, replicas=2, admission="kv"),
                         calculator_tasks(24, turns=2))
    run_dir = tmp_path / "run"
    argv = fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: len(records(run_dir)) >= 4 or proc.poll() is not None, 600, "the first records")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        docs = states(run_dir, ["tiny-0", "tiny-1"])
        assert [d["cpus"] for d in docs] == [["0"], ["1"]] and all(not d["gpus"] for d in docs)
        pgids = [int(str(d["pgid"])) for d in docs]
        with urllib.request.urlopen(f"http://127.0.0.1:{docs[0]['port']}/metrics", timeout=10) as resp:
            metrics = parse_metrics(resp.read().decode())
        for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
                     "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"):
            assert name in metrics, f"admission: kv and the benchmark read {name}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not any(group_members(g) for g in pgids), 20, "every vLLM process to go after kill -9")
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {r["job_id"]: r for r in records(run_dir)}
    assert 0 < len(before) < 24
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode in (0, 1), done.stderr
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * 24  # each job once, none lost
    assert [r for r in recs if r["job_id"] in before] == list(before.values())  # finished records untouched
    calls = sum(r["tool_calls"] for r in recs)
    assert calls >= 24, f"the trained checkpoint made {calls} parsed tool calls in 48 turns"
    cached = sum((r.get("usage") or {}).get("cache_read_tokens", 0) for r in recs)
    assert cached > 0, "records carry vLLM's cached prompt tokens (--enable-prompt-tokens-details)"
    logs = [(run_dir / "servers" / f"tiny-{i}.log").read_text() for i in range(2)]
    assert all("POST /v1/chat/completions" in log for log in logs), "both replicas served requests"
    report = subprocess.run(fasteval("report", str(run_dir), "--format", "json"), capture_output=True, text=True,
                            timeout=120, env=env())
    assert report.returncode == 0, report.stderr
    row = orjson.loads(report.stdout)["rows"][0]
    assert row["prefix_cache_hit_rate"] is not None and row["prefix_cache_hit_rate"] > 0


def test_kill_9_of_a_replicas_launcher_leaves_no_vllm_and_the_replica_comes_back(tmp_path: Path, vllm: str,
                                                                                  checkpoint: Path) -> None:
    config = write_sweep(tmp_path, serve_block(checkpoint, vllm, health_interval_s=1.0),
                         calculator_tasks(40, turns=2))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: len(records(run_dir)) >= 2 or proc.poll() is not None, 600, "the first records")
        first = states(run_dir, ["tiny-0"])[0]
        launcher, pgid = int(str(first["pid"])), int(str(first["pgid"]))
        servers = [p for p in group_members(pgid) if p != launcher]
        assert servers, "vLLM runs in the launcher's process group"
        os.kill(launcher, signal.SIGKILL)
        wait_for(lambda: not group_members(pgid), 30, "the orphaned vLLM server to be stopped")
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 1), err
    last = states(run_dir, ["tiny-0"])[0]
    assert last["restarts"] == 1 and last["state"] == "stopped"
    assert len(records(run_dir)) == 40


def test_whitespace_cut_at_the_token_limit_is_max_tokens_not_answered(tmp_path: Path, vllm: str,
                                                                       checkpoint: Path) -> None:
    tasks = [{"id": "silent", "prompt": "Stay silent.", "answer": "x"},
             {"id": "calc", "prompt": "What is 12 + 7?", "answer": "19", "tools": ["calculator"]}]
    config = write_sweep(tmp_path, serve_block(checkpoint, vllm), tasks)
    text = config.read_text().replace("max_tokens: 48", "max_tokens: 1")  # one token of blank lines, then cut
    config.write_text(text)
    run_dir = tmp_path / "run"
    start = time.monotonic()
    done = subprocess.run(fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress"),
                          capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode in (0, 1), done.stderr
    recs = {r["task_id"]: r for r in records(run_dir)}
    silent = recs["silent"]
    assert silent["termination"] == "max_tokens" and silent["answer"] is None, silent
    assert not silent["trajectory"]["messages"][-1]["content"].strip()  # vLLM did send whitespace only
    assert recs["calc"]["termination"] == "max_tokens"  # a tool call cut short is no answer either
    assert all(r["latency_s"] < time.monotonic() - start - 10 for r in recs.values()), \
        "latency_s does not include the server's start-up"
