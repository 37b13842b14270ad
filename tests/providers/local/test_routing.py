"""The router against real sim replicas: KV admission windows from /metrics, sticky pins, moves."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fasteval.core.job import job_context
from providers.base import ChatRequest
from providers.local import RoutedProvider, Router, ServerGroup, ServeSpec
from providers.openai_compat import OpenAICompatProvider
from tests.providers.local.conftest import sim_command


def group_of(tmp_path: Path, replicas: int, *extra: str) -> ServerGroup:
    spec = ServeSpec.from_config("m", {"model": "x", "command": sim_command(*extra), "replicas": replicas,
                                       "startup_timeout_s": 30, "stop_timeout_s": 5})
    return ServerGroup(spec, [str(i) for i in range(replicas)], tmp_path)


def request(i: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": f"question {i}"}], seed=0)


async def test_kv_admission_holds_the_window_to_what_the_server_runs(tmp_path: Path) -> None:
    group = group_of(tmp_path, 1, "--prefix-cache", "--max-running", "2", "--decode-ms", "300")
    await group.start()
    router = Router(group, lambda url: OpenAICompatProvider(url, "m"), admission="kv", initial_window=32,
                    poll_s=0.05)
    provider = RoutedProvider(router, "local:m")
    try:
        answers = await asyncio.gather(*(provider.chat(request(i)) for i in range(8)))
    finally:
        await provider.close()
        await group.stop()
    assert len(answers) == 8
    window = router.routes[0].window
    # the server queued requests: the window fell from 32 to about what it runs at once (2), then
    # grows again by steps while nothing waits
    assert window is not None and 2 <= window < 8
    assert router.routes[0].in_flight == 0


async def test_sticky_pins_each_trajectory_and_spreads_new_ones(tmp_path: Path) -> None:
    group = group_of(tmp_path, 2)
    await group.start()
    router = Router(group, lambda url: OpenAICompatProvider(url, "m"))
    provider = RoutedProvider(router, "local:m")
    seen: dict[str, set[str]] = {}

    async def one(t: int) -> None:
        with job_context(f"t{t}") as job:
            for i in range(3):
                await provider.chat(request(t * 10 + i))
                seen.setdefault(f"t{t}", set()).add(job.pins[id(router)].replica.label)

    try:
        await asyncio.gather(*(one(t) for t in range(6)))
    finally:
        await provider.close()
        await group.stop()
    assert all(len(labels) == 1 for labels in seen.values())
    per_replica = [sum(1 for labels in seen.values() if r.label in labels) for r in group.replicas]
    assert per_replica == [3, 3]
    assert all(r.trajectories == 0 for r in router.routes)  # every trajectory released its pin
