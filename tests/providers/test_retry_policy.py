"""The one retry loop (providers.retry) that models, roles and upstream tools share."""

from __future__ import annotations

import pytest

from providers.base import ProviderError
from providers.limits import AdaptiveLimit
from providers.retry import MODEL_RETRYABLE, RetryPolicy, backoff_delay, classify_status, retry_call


class Waits(list[float]):
    async def __call__(self, s: float) -> None:
        self.append(s)


def _failing(kinds: list[str], retry_after: float | None = None) -> tuple[list[int], object]:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) <= len(kinds):
            raise ProviderError(kinds[len(calls) - 1], "no", retry_after=retry_after)  # type: ignore[arg-type]
        return "ok"
    return calls, attempt


async def test_retries_until_success_and_reports_each_real_retry() -> None:
    calls, attempt = _failing(["transient", "rate_limit"])
    seen: list[float] = []
    waits = Waits()
    window = AdaptiveLimit(10)
    out = await retry_call(RetryPolicy(base_delay_s=0.1, max_delay_s=1), attempt, error_type=ProviderError,  # type: ignore[arg-type]
                           retryable=MODEL_RETRYABLE, on_retry=lambda d, e: seen.append(d), window=window, sleep=waits)
    assert out == "ok" and len(calls) == 3 and seen == waits and len(waits) == 2
    assert window.limit == 8  # shrank on the rate limit only, never on the 5xx


async def test_no_phantom_retry_after_the_last_attempt_and_fatal_is_not_retried() -> None:
    calls, attempt = _failing(["timeout"] * 5)
    waits = Waits()
    with pytest.raises(ProviderError):
        await retry_call(RetryPolicy(max_attempts=3, base_delay_s=0.01), attempt, error_type=ProviderError,  # type: ignore[arg-type]
                         retryable=MODEL_RETRYABLE, sleep=waits)
    assert len(calls) == 3 and len(waits) == 2
    calls, attempt = _failing(["auth"])
    with pytest.raises(ProviderError):
        await retry_call(RetryPolicy(), attempt, error_type=ProviderError, retryable=MODEL_RETRYABLE, sleep=waits)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_retry_after_is_honoured_and_capped_per_caller() -> None:
    assert backoff_delay(RetryPolicy(max_delay_s=60, total_budget_s=900), 1, 120.0) == 120.0  # models: above the cap
    assert backoff_delay(RetryPolicy(max_retry_after_s=30), 1, 120.0) == 30.0  # tools: capped
    assert 0.5 <= backoff_delay(RetryPolicy(base_delay_s=1), 1, None) <= 1.0
    assert backoff_delay(RetryPolicy(base_delay_s=1, max_delay_s=5), 10, None) <= 5.0


def test_plain_http_statuses_map_onto_one_taxonomy() -> None:
    assert [classify_status(s) for s in (429, 401, 403, 408, 500, 503, 529, 400, 404)] == [
        "rate_limit", "auth", "auth", "transient", "transient", "transient", "transient", "fatal", "fatal"]
