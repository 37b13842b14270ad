"""vLLM's API server processes as the sim plays them: image preprocessing before the engine.

vLLM decodes and resizes a request's images in its API server (front-end) process before the
engine sees the request; with one such process, image-heavy traffic queues there while the engine
idles. The sim models that with ``processes`` slots, each taking ``ms_per_image`` per image, and
exposes what vLLM's ``/metrics`` then shows: the requests past preprocessing as running, none
waiting, and a time-to-first-token histogram that counts the wait in front.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from typing import Any

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
"""vLLM's bucket bounds for ``vllm:time_to_first_token_seconds``."""


def image_count(body: dict[str, Any]) -> int:
    """Image parts in an OpenAI-form request's messages."""
    return sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
               for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")


class Frontend:
    """The API server processes: preprocessing slots, and the time to first token they add."""

    def __init__(self, ms_per_image: float = 0.0, processes: int = 1) -> None:
        self.ms_per_image = ms_per_image
        self._slots = asyncio.Semaphore(max(1, processes))
        self.preprocessing = 0
        """Requests in the front end (waiting for a slot or being preprocessed): the engine does not see them."""
        self.ttft_sum = 0.0
        self.ttft_count = 0
        self._buckets = [0] * (len(TTFT_BUCKETS) + 1)

    async def preprocess(self, body: dict[str, Any]) -> None:
        """Hold the request while one of the processes works through its images."""
        images = image_count(body)
        if not images or self.ms_per_image <= 0:
            return
        self.preprocessing += 1
        try:
            async with self._slots:
                await asyncio.sleep(images * self.ms_per_image / 1000)
        finally:
            self.preprocessing -= 1

    def first_token(self, arrived: float) -> None:
        """A non-streamed answer's first token is its whole answer: counted from the request's arrival."""
        seconds = time.monotonic() - arrived
        self.ttft_sum += seconds
        self.ttft_count += 1
        self._buckets[bisect_left(TTFT_BUCKETS, seconds)] += 1

    def metrics(self, running: int | None) -> str:
        """Prometheus text: the TTFT histogram, and the engine's running/waiting unless a prefix-cache model says them."""
        label = 'model_name="sim"'
        lines = []
        if running is not None:
            lines += [f"vllm:num_requests_running{{{label}}} {running}", f"vllm:num_requests_waiting{{{label}}} 0"]
        name = "vllm:time_to_first_token_seconds"
        lines.append(f"# TYPE {name} histogram")
        total = 0
        for bound, n in zip((*TTFT_BUCKETS, "+Inf"), self._buckets, strict=True):
            total += n
            lines.append(f'{name}_bucket{{{label},le="{bound}"}} {total}')
        lines += [f"{name}_sum{{{label}}} {self.ttft_sum}", f"{name}_count{{{label}}} {self.ttft_count}"]
        return "\n".join(lines) + "\n"
