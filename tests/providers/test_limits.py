"""AIMD window arithmetic and the RPM/TPM budgets, on the real limiter classes."""

from __future__ import annotations

import asyncio

import pytest

from providers.limits import AdaptiveLimit, RateLimiter


def test_aimd_shrinks_on_rate_limit_and_grows_back() -> None:
    lim = AdaptiveLimit(100, grow_every=2)
    lim.on_rate_limit()
    lim.on_rate_limit()
    assert lim.limit == 64 and lim.changes == 2
    for _ in range(6):
        lim.on_success()
    assert lim.limit == 67
    small = AdaptiveLimit(2)
    for _ in range(10):
        small.on_rate_limit()
    assert small.limit == 1  # never below the floor


async def test_window_blocks_then_wakes_waiters_in_order() -> None:
    lim = AdaptiveLimit(2)
    await lim.acquire()
    await lim.acquire()
    order: list[int] = []

    async def waiter(i: int) -> None:
        await lim.acquire()
        order.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert lim.waiting == 3 and order == []
    lim.release()
    lim.release()
    await asyncio.sleep(0)
    assert order == [0, 1] and lim.in_flight == 2
    tasks[2].cancel()
    await asyncio.gather(tasks[2], return_exceptions=True)
    assert lim.waiting == 0


async def test_rpm_budget_makes_the_next_request_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    slept: list[float] = []
    monkeypatch.setattr("providers.limits.time.monotonic", lambda: clock[0])

    async def fake_sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    monkeypatch.setattr("providers.limits.asyncio.sleep", fake_sleep)
    rl = RateLimiter(rpm=3)
    for _ in range(3):
        assert await rl.acquire() == 0.0
    clock[0] += 10
    waited = await rl.acquire()
    assert waited == pytest.approx(50.0) and slept == [pytest.approx(50.0)]


async def test_tpm_budget_counts_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("providers.limits.time.monotonic", lambda: clock[0])

    async def fake_sleep(s: float) -> None:
        clock[0] += s

    monkeypatch.setattr("providers.limits.asyncio.sleep", fake_sleep)
    rl = RateLimiter(tpm=1000)
    await rl.acquire()
    rl.record_tokens(1200)
    clock[0] = 5.0
    assert await rl.acquire() == pytest.approx(55.0)


async def test_resize_admits_waiters_at_once_and_a_cut_admits_no_more() -> None:
    lim = AdaptiveLimit(1)
    await lim.acquire()
    waiter = asyncio.ensure_future(lim.acquire())
    await asyncio.sleep(0)
    assert lim.waiting == 1
    lim.resize(3)
    await asyncio.wait_for(waiter, 1)
    assert (lim.in_flight, lim.limit, lim.ceiling) == (2, 3, 3)
    lim.resize(1)
    late = asyncio.ensure_future(lim.acquire())
    lim.release()
    await asyncio.sleep(0)
    assert not late.done()  # one still in flight: the cut to 1 holds
    lim.release()
    await asyncio.wait_for(late, 1)
    late_cancelled = asyncio.ensure_future(lim.acquire())
    await asyncio.sleep(0)
    late_cancelled.cancel()
    lim.release()  # _wake drops the cancelled waiter; its own cleanup must not fail
    with pytest.raises(asyncio.CancelledError):
        await late_cancelled


async def test_set_rates_wakes_a_request_waiting_on_the_old_budget() -> None:
    rl = RateLimiter(rpm=1)
    await rl.acquire()
    waiter = asyncio.ensure_future(rl.acquire())  # would wait ~60 s
    await asyncio.sleep(0.05)
    assert not waiter.done()
    rl.set_rates(None, None)
    assert await asyncio.wait_for(waiter, 5) < 5
