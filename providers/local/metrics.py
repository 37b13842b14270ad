"""A served replica's ``/metrics`` (vLLM's Prometheus text), read with bounds, and what it tells.

vLLM runs a request's multimodal preprocessing (decoding, resizing, tiling the images) in its API
server process, before the engine sees the request. When that front end is the ceiling, the engine
has little to do (few requests running, none waiting) while requests pile up in front of it and
the time to first token climbs (vLLM 0.32 counts it from the start of rendering: the
preprocessing is in it, the wait for the front end is not, so that wait is read from how many
requests we have in flight there that its engine does not hold). The body is another process's text: it is
read up to a size cap, and a line that is not a well-formed sample is skipped, never raised on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aiohttp

METRICS_MAX_BYTES = 4 * 1024 * 1024
"""A bigger /metrics body is not read (vLLM's, with per-LoRA and per-engine series, is far smaller)."""
METRICS_MAX_VALUE = 1e15
"""A sample past this (an infinity, ``1e999``, a 40-digit count) is skipped: no counter or gauge of a
server reaches it, and its readers turn counts into ints (``int(inf)`` raises, and would end the
health watch or the KV admission poll that read it)."""

_SAMPLE = re.compile(r"^(vllm:[a-z_]+)(?:\{[^}\n]{0,2000}\})?[ \t]+([0-9][0-9.eE+-]{0,40})[ \t]*(?:[0-9]+)?$", re.M)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text to {name: value} (labels dropped, same-named series summed, malformed values
    and values past ``METRICS_MAX_VALUE`` skipped: every value returned is finite)."""
    out: dict[str, float] = {}
    for name, value in _SAMPLE.findall(text):
        try:
            number = float(value)
        except ValueError:
            continue
        if not 0 <= number <= METRICS_MAX_VALUE:  # NaN fails this too (the pattern has no sign)
            continue
        out[name] = out.get(name, 0.0) + number
    return out


async def read_metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float] | None:
    """One replica's metrics, or None when it does not answer, answers an error or too much."""
    try:
        async with session.get(url) as r:
            if r.status != 200 or (r.content_length or 0) > METRICS_MAX_BYTES:
                return None
            body = bytearray()
            async for chunk in r.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > METRICS_MAX_BYTES:
                    return None
    except (aiohttp.ClientError, TimeoutError):
        return None
    return parse_metrics(body.decode("utf-8", "replace"))


TTFT = "vllm:time_to_first_token_seconds"
SUSTAINED_POLLS = 3
"""Consecutive polls that must all look preprocessing-bound before the warning: one slow batch is not a ceiling."""
CLIMB = 2.0
"""How much the time to first token must have grown over the replica's best interval to count as climbing."""
MIN_CLIMB_S = 0.25
"""...and by at least this much: a few milliseconds' jitter on a fast server doubles nothing that matters."""
MIN_OUTSTANDING = 4


@dataclass(slots=True)
class PreprocessWatch:
    """Per replica: does its /metrics, next to what we have sent it, say that preprocessing is the ceiling?

    The signal, every poll: of the requests we have in flight on the replica, at most half are
    running or waiting in its engine (the rest sit in its front end), the engine's waiting queue
    is no longer than what it runs, and the mean time to first token of the requests that got one
    since the last poll is at least ``CLIMB`` times (and ``MIN_CLIMB_S`` above) the best such mean
    seen on this replica. After
    ``SUSTAINED_POLLS`` such polls in a row it says why, once.
    """

    label: str
    best_ttft_s: float | None = None
    streak: int = 0
    warned: bool = False
    _ttft_sum: float | None = None
    _ttft_count: float = 0.0

    def observe(self, metrics: dict[str, float], outstanding: int) -> str | None:
        """The warning's reason the first time the replica is judged preprocessing-bound, else None."""
        total, count = metrics.get(f"{TTFT}_sum"), metrics.get(f"{TTFT}_count", 0.0)
        if total is None or self.warned:
            return None
        previous, seen = self._ttft_sum, self._ttft_count
        self._ttft_sum, self._ttft_count = total, count
        if previous is None or count < seen:  # the first poll, or the server restarted: a new baseline
            self.best_ttft_s, self.streak = None, 0
            return None
        done = count - seen
        if done <= 0:  # nothing got its first token since the last poll: no evidence either way
            return None
        mean = (total - previous) / done
        self.best_ttft_s = mean if self.best_ttft_s is None else min(self.best_ttft_s, mean)
        running = int(metrics.get("vllm:num_requests_running", 0))
        waiting = int(metrics.get("vllm:num_requests_waiting", 0))
        in_engine = running + waiting
        bound = (outstanding >= MIN_OUTSTANDING and in_engine * 2 <= outstanding and waiting <= running
                 and mean >= max(CLIMB * self.best_ttft_s, self.best_ttft_s + MIN_CLIMB_S))
        self.streak = self.streak + 1 if bound else 0
        if self.streak < SUSTAINED_POLLS:
            return None
        self.warned = True
        return (f"{self.label} looks preprocessing-bound: {outstanding} requests sent but only {running} running "
                f"and {waiting} waiting in its engine, time to first token {mean:.2f} s (best {self.best_ttft_s:.2f} s); "
                "its API server process is the ceiling: raise serve.api_server_count, set image_resize: auto, "
                "or local_media: true (docs/serving.md)")
