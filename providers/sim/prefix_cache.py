"""A prefix-cache model for the sim, so routing across replicas can be measured without a GPU.

Per server: an LRU of message-prefix hashes with a token capacity (the KV cache), a limit on
running sequences (requests beyond it wait, like vLLM's scheduler queue), and a latency that
grows with the prompt tokens not found in the cache (prefill) plus a fixed decode time. Tokens
are estimated as serialised bytes / 4. ``/metrics`` exposes the counters under vLLM's
Prometheus names so the same router code reads the sim and a real server.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class PrefixCacheModel:
    capacity_tokens: int = 200_000
    prefill_ms_per_ktok: float = 20.0
    """Milliseconds per 1000 uncached prompt tokens."""
    decode_ms: float = 20.0
    max_running: int = 64


def message_chain(messages: list[dict[str, Any]]) -> list[tuple[bytes, int]]:
    """(hash of messages[:i+1], tokens of message i) for each prefix: a request's cacheable blocks."""
    out: list[tuple[bytes, int]] = []
    h = b""
    for m in messages:
        raw = orjson.dumps(m, option=orjson.OPT_SORT_KEYS)
        h = hashlib.blake2b(h + raw, digest_size=12).digest()
        out.append((h, max(1, len(raw) // 4)))
    return out


class PrefixCache:
    """The per-server state: cached prefixes, running and waiting requests, hit counters."""

    def __init__(self, model: PrefixCacheModel) -> None:
        self.model = model
        self._lru: OrderedDict[bytes, int] = OrderedDict()
        self.used_tokens = 0
        self.query_tokens = 0
        self.hit_tokens = 0
        self.running = 0
        self.waiting = 0
        self.running_tokens = 0
        self._slots = asyncio.Semaphore(model.max_running)

    def lookup(self, chain: list[tuple[bytes, int]]) -> tuple[int, int]:
        """(prompt tokens, tokens already cached) and mark every prefix of this prompt as cached."""
        total = sum(t for _, t in chain)
        hit = 0
        for h, t in chain:
            if h not in self._lru:
                break
            hit += t
        for h, t in chain:
            if h in self._lru:
                self._lru.move_to_end(h)
            else:
                self._lru[h] = t
                self.used_tokens += t
        while self.used_tokens > self.model.capacity_tokens and self._lru:
            _, t = self._lru.popitem(last=False)
            self.used_tokens -= t
        self.query_tokens += total
        self.hit_tokens += hit
        return total, hit

    async def serve(self, messages: list[dict[str, Any]]) -> tuple[int, int]:
        """Wait for a running slot, then take as long as prefill of the uncached part plus decode."""
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        total, hit = self.lookup(message_chain(messages))
        self.running_tokens += total
        try:
            delay = self.model.decode_ms + (total - hit) * self.model.prefill_ms_per_ktok / 1000
            await asyncio.sleep(delay / 1000)
        finally:
            self.running -= 1
            self.running_tokens -= total
            self._slots.release()
        return total, hit

    def metrics(self) -> str:
        """Prometheus text with the vLLM (V1) metric names the router and benchmarks read."""
        usage = min(1.0, self.running_tokens / max(1, self.model.capacity_tokens))
        lines = [
            ("vllm:num_requests_running", self.running), ("vllm:num_requests_waiting", self.waiting),
            ("vllm:kv_cache_usage_perc", usage), ("vllm:gpu_cache_usage_perc", usage),
            ("vllm:prefix_cache_queries_total", self.query_tokens), ("vllm:prefix_cache_hits_total", self.hit_tokens),
        ]
        return "".join(f'{name}{{model_name="sim"}} {value}\n' for name, value in lines)
