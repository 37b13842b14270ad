"""Reading a replica's /metrics with bounds, and judging from it whether preprocessing is the ceiling."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from providers.local.metrics import (
    METRICS_MAX_BYTES,
    SUSTAINED_POLLS,
    TTFT,
    PreprocessWatch,
    parse_metrics,
    read_metrics,
)


def sample(ttft_sum: float, ttft_count: float, running: int = 0, waiting: int = 0) -> dict[str, float]:
    return {f"{TTFT}_sum": ttft_sum, f"{TTFT}_count": ttft_count, "vllm:num_requests_running": running,
            "vllm:num_requests_waiting": waiting}


def climbing(watch: PreprocessWatch, outstanding: int, *, running: int = 0, waiting: int = 0,
             polls: int = SUSTAINED_POLLS + 1) -> list[str | None]:
    """Polls whose interval TTFT goes 0.1 s, then 1 s, 2 s, 3 s...: a queue building in front."""
    out = [watch.observe(sample(0.0, 0), outstanding), watch.observe(sample(0.1, 1), outstanding)]
    total, count = 0.1, 1
    for i in range(1, polls + 1):
        total, count = total + 2 * float(i), count + 2
        out.append(watch.observe(sample(total, count, running, waiting), outstanding))
    return out


def test_malformed_or_hostile_lines_are_skipped_not_raised_on() -> None:
    text = ("vllm:num_requests_running{a=\"b\"} 2\nvllm:num_requests_running 1.2.3\nvllm:num_requests_waiting -\n"
            "vllm:num_requests_waiting{x=\"" + "y" * 5000 + "\"} 7\nvllm:kv_cache_usage_perc 0.5 1700000000000\n"
            "vllm:num_requests_running +Inf\n\x1b[31mvllm:prompt_tokens_total 9\n")
    assert parse_metrics(text) == {"vllm:num_requests_running": 2.0, "vllm:kv_cache_usage_perc": 0.5}


async def test_a_metrics_body_over_the_cap_is_not_read() -> None:
    body = {"small": b"vllm:num_requests_running 3\n", "huge": b"# x\n" * (METRICS_MAX_BYTES // 4 + 1)}

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=body[request.match_info["which"]])

    app = web.Application()
    app.router.add_get("/{which}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            assert await read_metrics(session, f"http://127.0.0.1:{port}/small") == {"vllm:num_requests_running": 3.0}
            assert await read_metrics(session, f"http://127.0.0.1:{port}/huge") is None
            assert await read_metrics(session, f"http://127.0.0.1:{port}/missing/path") is None
    finally:
        await runner.cleanup()


def test_a_sustained_climb_with_requests_held_in_front_warns_once() -> None:
    watch = PreprocessWatch("ck-0")
    said = [r for r in climbing(watch, outstanding=16, running=1) if r is not None]
    assert len(said) == 1 and said[0].startswith("ck-0 looks preprocessing-bound: 16 requests sent but only 1 running")
    assert [r for r in climbing(watch, outstanding=16) if r is not None] == []  # once per replica


def test_no_warning_when_the_engine_holds_the_requests_or_few_are_sent() -> None:
    assert not any(climbing(PreprocessWatch("a"), outstanding=16, running=12))  # the engine is busy: GPU-bound
    assert not any(climbing(PreprocessWatch("b"), outstanding=16, running=2, waiting=6))  # its own queue
    assert not any(climbing(PreprocessWatch("c"), outstanding=3))  # too few sent to tell
    assert not any(climbing(PreprocessWatch("d"), outstanding=16, polls=SUSTAINED_POLLS - 1))  # not sustained


def test_a_flat_ttft_or_a_restart_resets_the_evidence() -> None:
    watch = PreprocessWatch("ck-0")
    for i in range(10):  # slow but steady: 1 s each, no climb over the best
        assert watch.observe(sample(float(i), i), 16) is None
    watch = PreprocessWatch("ck-1")
    assert not any(climbing(watch, 16, polls=SUSTAINED_POLLS - 1)) and watch.streak == SUSTAINED_POLLS - 1
    assert watch.observe(sample(0.0, 0), 16) is None  # the server restarted: its counters start over
    assert watch.streak == 0 and watch.best_ttft_s is None
