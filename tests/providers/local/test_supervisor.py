"""The supervisor on its own: real server processes (the sim), ready checks, failures, stops."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import orjson
import pytest

from providers.local import EndpointDown, ServerGroup, ServerStartError, ServeSpec, parse_metrics
from tests.providers.local.conftest import gone_within, sim_command


def spec(*extra: str, **fields: object) -> ServeSpec:
    serve = {"model": "tiny", "command": sim_command(*extra), "startup_timeout_s": 20, "stop_timeout_s": 5,
             "health_interval_s": 0.5, "restart_backoff_s": 0.1, **fields}
    return ServeSpec.from_config("m", serve)


async def test_start_ready_stop_leaves_state_files_and_no_process(tmp_path: Path) -> None:
    group = ServerGroup(spec(replicas=2), ["0", "1"], tmp_path)
    await group.start()
    try:
        for r in group.replicas:
            async with aiohttp.ClientSession() as s, s.get(f"{r.base_url}/models") as resp:
                assert [m["id"] for m in (await resp.json())["data"]] == ["m"]
        docs = [orjson.loads((tmp_path / f"m-{i}.json").read_bytes()) for i in range(2)]
        assert [d["state"] for d in docs] == ["ready", "ready"]
        assert [d["gpus"] for d in docs] == [["0"], ["1"]]
        assert len({d["port"] for d in docs}) == 2
        pgids = [d["pgid"] for d in docs]
    finally:
        await group.stop()
    for pgid in pgids:
        assert gone_within(pgid, 5)
    docs = [orjson.loads((tmp_path / f"m-{i}.json").read_bytes()) for i in range(2)]
    assert [d["state"] for d in docs] == ["stopped", "stopped"]
    assert all(d["stopped_at"] >= d["started_at"] for d in docs)


@pytest.mark.slow
async def test_slow_start_is_waited_for(tmp_path: Path) -> None:
    group = ServerGroup(spec("--startup-delay-s", "2"), ["0"], tmp_path)
    await group.start()
    assert group.replicas[0].state == "ready"
    await group.stop()


@pytest.mark.slow
async def test_never_ready_times_out_with_command_and_log_tail(tmp_path: Path) -> None:
    group = ServerGroup(spec("--never-ready", startup_timeout_s=3), ["0"], tmp_path)
    with pytest.raises(ServerStartError) as exc:
        await group.start()
    msg = str(exc.value)
    assert "not ready after 3 s" in msg and "--never-ready" in msg and "last 40 log lines" in msg
    assert "launcher: pid" in msg  # the server's output (here the launcher's first line) is in the tail
    assert group.replicas[0].state == "failed"
    assert gone_within(group.replicas[0].pid or 0, 5)


async def test_exit_at_startup_shows_the_error_line_and_a_hint(tmp_path: Path) -> None:
    group = ServerGroup(spec("--fail-at-start", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"),
                        ["0"], tmp_path)
    with pytest.raises(ServerStartError) as exc:
        await group.start()
    msg = str(exc.value)
    assert "exited during startup (code 1)" in msg
    assert "CUDA out of memory. Tried to allocate" in msg
    assert "hint: CUDA OOM" in msg


async def test_port_taken_is_reported_with_a_hint(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        command = ["{python}", "-m", "providers.sim", "--port", str(port), "--model", "{served_model_name}:tools"]
        group = ServerGroup(ServeSpec.from_config("m", {"model": "x", "command": command, "startup_timeout_s": 20}),
                            ["0"], tmp_path)
        with pytest.raises(ServerStartError) as exc:
            await group.start()
    assert "hint: port in use" in str(exc.value)


async def test_dead_replica_is_restarted_with_backoff_then_given_up(tmp_path: Path) -> None:
    group = ServerGroup(spec(max_restarts=1), ["0"], tmp_path)
    await group.start()
    replica = group.replicas[0]
    first_pid = replica.pid
    replica.report_unhealthy("test")
    ready = await group.wait_ready()
    assert ready == [replica] and replica.restarts == 1 and replica.pid != first_pid
    assert gone_within(first_pid or 0, 5)
    replica.report_unhealthy("test again")
    with pytest.raises(EndpointDown, match="no server left"):
        await group.wait_ready()
    assert replica.state == "failed" and "gave up after 1 restarts" in (replica.last_error or "")
    await group.stop()


async def test_replicas_sharing_a_gpu_start_one_after_the_other(tmp_path: Path) -> None:
    group = ServerGroup(spec(replicas=2), ["0", "0"], tmp_path)
    await group.start()
    try:
        first, second = (orjson.loads((tmp_path / f"m-{i}.json").read_bytes()) for i in range(2))
        assert first["state"] == second["state"] == "ready"
        assert second["started_at"] >= first["started_at"]
        assert group.replicas[1].log_path.read_text().count("=== fasteval: start") == 1
    finally:
        await group.stop()


async def test_prefix_cache_counters_outlive_the_server_in_its_state_file(tmp_path: Path) -> None:
    group = ServerGroup(spec("--prefix-cache"), ["0"], tmp_path)
    await group.start()
    first = {"role": "user", "content": "a long first question " * 20}
    try:
        async with aiohttp.ClientSession() as s:
            url = group.replicas[0].base_url
            for messages in ([first], [first, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]):
                async with s.post(f"{url}/chat/completions", json={"model": "m", "messages": messages}) as resp:
                    assert resp.status == 200
            async with s.get(url.removesuffix("/v1") + "/metrics") as resp:
                text = await resp.text()
        assert "prefix_cache" not in orjson.loads((tmp_path / "m-0.json").read_bytes())  # read as it stops
    finally:
        await group.stop()
    metrics = parse_metrics(text)
    kept = orjson.loads((tmp_path / "m-0.json").read_bytes())["prefix_cache"]
    assert kept == {"queries": metrics["vllm:prefix_cache_queries_total"], "hits": metrics["vllm:prefix_cache_hits_total"]}
    assert 0 < kept["hits"] < kept["queries"]  # the second request found the first one's prefix
