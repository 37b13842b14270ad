"""A real loopback aiohttp upstream that counts the calls it serves (used as a fixture)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import aiohttp


@dataclass
class Upstream:
    """A search-like HTTP service on 127.0.0.1; ``calls`` counts requests per query."""

    url: str
    session: aiohttp.ClientSession
    calls: Counter[str] = field(default_factory=Counter)
    fail: set[str] = field(default_factory=set)

    async def fetch(self, q: str) -> str:
        async with self.session.get(self.url, params={"q": q}, timeout=aiohttp.ClientTimeout(total=10)) as r:
            if r.status != 200:
                raise RuntimeError(f"upstream HTTP {r.status} for {q!r}")
            return await r.text()

    @property
    def total(self) -> int:
        return sum(self.calls.values())
