"""A served replica whose ``/metrics`` is hostile: values past any float, huge counts, endless labels.

Real sim replicas (``--metrics-file`` adds the hostile lines to what their /metrics says) behind
the real supervisor and router: KV admission keeps polling with sane windows, the health watch
keeps watching (a restart still happens), and the servers stop cleanly, never an OverflowError
that ends a watcher or leaves a server running.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from providers.base import ChatRequest
from providers.local import RoutedProvider, Router, ServerGroup, ServeSpec
from providers.local.launcher import group_members
from providers.openai_compat import OpenAICompatProvider
from tests.providers.local.conftest import sim_command

HOSTILE = "\n".join([
    "vllm:num_requests_running 1e999", "vllm:num_requests_waiting 99999999999999999999999999999999999999",
    "vllm:kv_cache_usage_perc 1e999", "vllm:gpu_cache_usage_perc 1e400",
    "vllm:time_to_first_token_seconds_sum 1e999", "vllm:time_to_first_token_seconds_count 1e999",
    "vllm:prefix_cache_queries_total 1e999", "vllm:prefix_cache_hits_total 1e999",
    'vllm:num_requests_running{x="' + "y" * 1990 + '"} 1e999',
]) + "\n"


def _group(tmp: Path, *extra: str) -> ServerGroup:
    metrics = tmp / "metrics.txt"
    metrics.write_text(HOSTILE)
    spec = ServeSpec.from_config("m", {"model": "x", "command": sim_command("--metrics-file", str(metrics), *extra),
                                       "startup_timeout_s": 30, "stop_timeout_s": 5, "health_interval_s": 0.1,
                                       "restart_backoff_s": 0.1})
    return ServerGroup(spec, ["0"], tmp)


def _request(i: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": f"question {i}"}], seed=0)


async def test_kv_admission_keeps_polling_a_replica_whose_metrics_are_absurd(tmp_path: Path) -> None:
    group = _group(tmp_path, "--latency-ms", "50")
    await group.start()
    router = Router(group, lambda url: OpenAICompatProvider(url, "m"), admission="kv", initial_window=4,
                    poll_s=0.05)
    provider = RoutedProvider(router, "local:m")
    try:
        answers = await asyncio.gather(*(provider.chat(_request(i)) for i in range(8)))
        await asyncio.sleep(0.5)  # several polls of the absurd metrics
        poller = router._poller
        assert poller is not None and not poller.done(), poller.exception() if poller and poller.done() else None
    finally:
        await provider.close()
        await group.stop()
    assert len(answers) == 8
    window = router.routes[0].window
    assert isinstance(window, int) and window >= 1


@pytest.mark.slow
async def test_the_health_watch_survives_absurd_metrics_and_still_restarts_a_dead_server(tmp_path: Path) -> None:
    group = _group(tmp_path)
    await group.start()
    replica = group.replicas[0]
    try:
        await asyncio.sleep(1.0)  # ten health checks, each reading /metrics
        assert replica._watch is not None and not replica._watch.done(), \
            replica._watch.exception() if replica._watch and replica._watch.done() else None
        pgid = replica.pid
        assert pgid is not None
        os.killpg(pgid, signal.SIGKILL)  # the server dies: the watch must see it and restart it
        for _ in range(300):
            if replica.restarts >= 1 and replica.state == "ready":
                break
            await asyncio.sleep(0.05)
        assert replica.restarts >= 1 and replica.state == "ready", (replica.state, replica.last_error)
        pgid = replica.pid
    finally:
        await group.stop()  # reads /metrics once more (the prefix-cache counters): never raises
    assert replica.state == "stopped"
    assert pgid is not None and not group_members(pgid)
