"""Served models on a node with no GPU, and the serving faults found against real vLLM (issue 22).

The sim stands in for the server binary here (fast, in every ``make test``); tests/vllm runs the
same paths against vLLM's CPU build.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from providers.local import ServerGroup, ServerStartError, ServeSpec
from providers.local.gpus import cpu_bind, usable_cpus
from providers.local.launcher import group_members
from providers.local.spec import hints_for
from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    gone_within,
    make_checkpoint,
    records,
    serve_block,
    sim_command,
)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def server_pid(pgid: int) -> int:
    """The server under a launcher: the group's member that is not the launcher."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        others = [p for p in group_members(pgid) if p != pgid]
        if others:
            return min(others)
        time.sleep(0.05)
    raise AssertionError(f"no server in group {pgid}")


def jsonl_config(tmp: Path, serve: dict[str, Any], prompts: list[str], *, run: dict[str, Any] | None = None,
                 **model: Any) -> Path:
    data = tmp / "tasks.jsonl"
    data.write_text("".join(orjson.dumps({"id": f"t{i}", "prompt": p, "answer": "1", "tools": ["calculator"]}).decode()
                            + "\n" for i, p in enumerate(prompts)))
    cfg = {"seeds": 1, "models": [{"name": "ck", "provider": "vllm", "serve": serve, **model}],
           "suites": [{"name": "jsonl", "options": {"path": str(data), "max_rounds": 3}}],
           "run": run if run is not None else {"gpus": "none", "max_concurrency": 8}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def sweep(config: Path, run_dir: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress"),
                          capture_output=True, text=True, timeout=timeout, env=env())


def cpu_spec(*extra: str, **fields: Any) -> ServeSpec:
    serve = {"model": "tiny", "command": sim_command(*extra), "startup_timeout_s": 20, "stop_timeout_s": 5,
             "health_interval_s": 0.3, "restart_backoff_s": 0.1, **fields}
    return ServeSpec.from_config("m", serve)


# -- CPU nodes ---------------------------------------------------------------------------------------
def test_cores_are_split_per_replica_and_bound_through_vllm_env() -> None:
    assert usable_cpus(["0", "1"]) == ["0", "1"]
    assert usable_cpus(["0", "1", "2", "3"]) == ["1", "2", "3"]  # one left for fasteval
    assert cpu_bind(["2", "3", "4", "5"], 2) == "2,3|4,5"  # a rank's cores per tensor-parallel worker


async def test_each_cpu_replica_gets_its_own_cores_kv_cache_and_placeholders_in_env(tmp_path: Path) -> None:
    spec = cpu_spec(replicas=2, kv_cache_gib=2, env={"MY_REPLICA": "r{replica}", "MY_CORES": "{cpus}@{port}"})
    group = ServerGroup(spec, [], tmp_path, cpus=["0", "1"])
    await group.start()
    try:
        envs = [environ_of(server_pid(r.pid or 0)) for r in group.replicas]
        assert [e["VLLM_CPU_OMP_THREADS_BIND"] for e in envs] == ["0", "1"]
        assert all(e["VLLM_CPU_KVCACHE_SPACE"] == "2" for e in envs)
        assert [e["MY_REPLICA"] for e in envs] == ["r0", "r1"]
        assert [e["MY_CORES"] for e in envs] == [f"{i}@{r.port}" for i, r in enumerate(group.replicas)]
        assert "CUDA_VISIBLE_DEVICES" not in envs[0] or envs[0]["CUDA_VISIBLE_DEVICES"] == os.environ.get(
            "CUDA_VISIBLE_DEVICES")
        assert [orjson.loads(r.state_path.read_bytes())["cpus"] for r in group.replicas] == [["0"], ["1"]]
    finally:
        await group.stop()


async def test_vllm_caches_go_to_our_cache_and_per_start_files_to_a_folder_removed_on_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    group = ServerGroup(cpu_spec(), [], tmp_path / "servers", cpus=["0"])
    await group.start()
    replica = group.replicas[0]
    try:
        e = environ_of(server_pid(replica.pid or 0))
        assert e["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
        assert e["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "torchinductor")
        tmp = replica.tmp_dir
        assert tmp is not None and e["TMPDIR"] == str(tmp) and await asyncio.to_thread(tmp.is_dir)
        assert len(str(tmp)) < 60  # vLLM's unix sockets under it must fit in 107 bytes
    finally:
        await group.stop()
    assert not await asyncio.to_thread(tmp.exists)


def test_default_command_asks_for_cached_tokens_and_a_one_element_command_names_the_binary() -> None:
    spec = ServeSpec.from_config("m", {"model": "/ckpt", "command": ["/opt/vllm-venv/bin/vllm"]})
    argv = spec.command_line(port=8000, host="127.0.0.1", replica=0)
    assert argv[:3] == ["/opt/vllm-venv/bin/vllm", "serve", "/ckpt"]
    assert "--enable-prompt-tokens-details" in argv
    off = ServeSpec.from_config("m", {"model": "/ckpt", "prompt_tokens_details": False})
    assert "--enable-prompt-tokens-details" not in off.command_line(port=1, host="h", replica=0)


@pytest.mark.slow
def test_config_check_says_what_runs_where_on_a_cpu_node_and_refuses_a_missing_vllm(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    config = jsonl_config(tmp_path, serve_block(ckpt, replicas=2), ["1 + 1"])
    proc = subprocess.run(fasteval_argv("config", "check", str(config)), capture_output=True, text=True,
                          timeout=60, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "served ck: 2 replica(s)" in proc.stdout and "on the CPU (no GPU here)" in proc.stdout
    missing = jsonl_config(tmp_path, {"model": str(ckpt), "command": [str(tmp_path / "no" / "vllm")]}, ["1 + 1"])
    for argv in (["config", "check", str(missing)], ["run", str(missing), "--run-dir", str(tmp_path / "r")]):
        proc = subprocess.run(fasteval_argv(*argv), capture_output=True, text=True, timeout=60, env=env())
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert "the vllm binary was not found" in proc.stderr and "make vllm" in proc.stderr
        assert "fasteval[vllm]" not in proc.stderr  # the GPU build is no advice on a CPU node


def test_too_many_cores_asked_is_refused_before_anything_starts(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    config = jsonl_config(tmp_path, serve_block(ckpt, replicas=2, cpus=512), ["1 + 1"])
    proc = sweep(config, tmp_path / "run")
    assert proc.returncode == 2 and "needs 1024 core(s) on this CPU node" in proc.stderr


# -- friction 1: a server that cannot start says so once, in its own words ----------------------------
def test_a_missing_server_binary_is_reported_once_without_false_hints(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    serve = {"model": str(ckpt), "command": [str(tmp_path / "nowhere"), "serve", "{model}", "--tool-call-parser",
                                            "hermes"], "startup_timeout_s": 20, "max_restarts": 0}
    proc = sweep(jsonl_config(tmp_path, serve, ["1 + 1"]), tmp_path / "run")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("server binary not found") == 1, proc.stderr
    assert "unknown tool parser" not in proc.stderr  # our echo of the command line is not the server's output
    assert "ck-0: ck-0:" not in proc.stderr
    assert hints_for("launcher: pid 1 group 1 starting: vllm serve --tool-call-parser hermes") == []


# -- friction 10: a killed launcher does not leave its server running --------------------------------
async def test_kill_9_of_a_replicas_launcher_stops_its_server_before_the_restart(tmp_path: Path) -> None:
    group = ServerGroup(cpu_spec(max_restarts=2), [], tmp_path, cpus=["0"])
    await group.start()
    replica = group.replicas[0]
    try:
        doc = orjson.loads(replica.state_path.read_bytes())
        launcher, pgid = int(doc["pid"]), int(doc["pgid"])
        server = server_pid(pgid)
        os.kill(launcher, signal.SIGKILL)
        while not (replica.restarts == 1 and replica.ready.is_set()):
            await asyncio.wait_for(group.changed().wait(), 20)
        assert replica.restarts == 1 and replica.ready.is_set(), replica.last_error
        assert await asyncio.to_thread(gone_within, pgid, 5), f"the orphaned server {server} still runs"
        new_pgid = int(orjson.loads(replica.state_path.read_bytes())["pgid"])
        assert new_pgid != pgid
    finally:
        await group.stop()
    assert await asyncio.to_thread(gone_within, new_pgid, 5)


async def test_stop_reaps_the_group_of_a_launcher_that_died(tmp_path: Path) -> None:
    group = ServerGroup(cpu_spec(max_restarts=0, health_interval_s=30), [], tmp_path, cpus=["0"])
    await group.start()
    replica = group.replicas[0]
    pgid = replica.pid or 0
    server_pid(pgid)
    os.kill(pgid, signal.SIGKILL)
    await asyncio.sleep(0.3)
    await group.stop()  # the sweep ends before the watch loop noticed: the server must go all the same
    assert await asyncio.to_thread(gone_within, pgid, 5)


# -- friction 3: a request that kills the server fails alone, with the server's own words -------------
@pytest.mark.slow
def test_a_request_that_kills_the_server_every_time_fails_its_job_alone(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    serve = serve_block(ckpt, "--die-on", "POISON", max_restarts=1)
    prompts = ["What is 1 + 1?", "POISON 2 + 2", "What is 3 + 3?", "What is 4 + 4?"]
    run_dir = tmp_path / "run"
    proc = sweep(jsonl_config(tmp_path, serve, prompts, capabilities={"seed": False}), run_dir)
    recs = {r["task_id"]: r for r in records(run_dir)}
    assert len(recs) == 4, proc.stderr
    bad = recs["t1"]
    assert bad["status"] == "error" and "took the server ck-0 down 3 times (the last 2 alone on it)" in bad["error"], bad["error"]
    assert "RuntimeError: sim engine killed by this request" in bad["error"]
    assert all(recs[t]["status"] == "ok" for t in ("t0", "t2", "t3")), proc.stderr
    assert proc.returncode == 1, proc.stderr  # a job error, not an endpoint down (3)


def test_a_dead_endpoint_says_why_in_the_servers_words(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    serve = serve_block(ckpt, "--die-on", "POISON", max_restarts=0)
    proc = sweep(jsonl_config(tmp_path, serve, ["POISON 1 + 1"]), tmp_path / "run")
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("incomplete: endpoint ck down") and "RuntimeError: sim engine killed" in last, last


# -- friction 4: latency_s is the job's, not the server start-up's ----------------------------------
@pytest.mark.slow
def test_latency_excludes_the_wait_for_servers_to_start(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    serve = serve_block(ckpt, "--startup-delay-s", "4")
    run_dir = tmp_path / "run"
    proc = sweep(jsonl_config(tmp_path, serve, [f"What is {i} + 1?" for i in range(4)]), run_dir)
    assert proc.returncode == 0, proc.stderr
    latencies = [r["latency_s"] for r in records(run_dir)]
    assert len(latencies) == 4 and max(latencies) < 3.0, latencies


# -- friction 2: capabilities reach each replica's provider -------------------------------------------
def test_seed_false_is_honoured_by_every_replica_of_a_served_model(tmp_path: Path) -> None:
    from fasteval.config.load import load_config
    from fasteval.engine.run.clients import build_client
    from fasteval.engine.run.serving import Serving

    ckpt = make_checkpoint(tmp_path / "ckpt")
    config = jsonl_config(tmp_path, serve_block(ckpt, replicas=2), ["1 + 1"], capabilities={"seed": False})
    cfg = load_config(str(config))
    serving = Serving(cfg, tmp_path / "run")
    spec = cfg.models[0]
    build_client("ck", spec, sim_base_url=None, resolver=None, serving=serving)
    replica_provider = serving.routers["ck"].make_provider("http://127.0.0.1:9/v1")
    assert replica_provider.accepts_seed() is False
    plain = build_client("p", {"name": "p", "provider": "vllm", "base_url": "http://127.0.0.1:9/v1",
                               "capabilities": {"seed": False}}, sim_base_url=None, resolver=None)
    assert plain.provider.accepts_seed() is False


# -- friction 6: `fasteval serve` prints the new address after a restart ------------------------------
@pytest.mark.slow
def test_fasteval_serve_prints_a_replicas_new_url_after_a_restart(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    config = jsonl_config(tmp_path, serve_block(ckpt, "--die-after", "0", max_restarts=2), ["x"])
    proc = subprocess.Popen(fasteval_argv("serve", str(config), "--model", "ck", "--run-dir", str(tmp_path / "s")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("ck-0: http://127.0.0.1:"), first
        url = first.split()[1]

        async def kill_it() -> None:
            async with aiohttp.ClientSession() as s:
                try:
                    await s.post(f"{url}/chat/completions", json={"model": "ck", "messages": []})
                except aiohttp.ClientError:
                    pass

        asyncio.run(kill_it())
        second = proc.stdout.readline()
        assert second.startswith("ck-0: http://127.0.0.1:") and "restarted" in second, second
        assert second.split()[1] != url
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_a_start_failure_carries_the_servers_last_error_without_the_label_twice(tmp_path: Path) -> None:
    group = ServerGroup(cpu_spec("--fail-at-start", "ValueError: Failed to infer device type"), [], tmp_path,
                        cpus=["0"])
    with pytest.raises(ServerStartError) as exc:
        await group.start()
    assert exc.value.what.startswith("the server exited during startup (code 1): ValueError: Failed to infer")
    assert "hint: vLLM found no device" in str(exc.value)
    assert not (group.replicas[0].last_error or "").startswith("m-0")
