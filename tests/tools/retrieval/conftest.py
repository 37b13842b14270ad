"""Fixtures: the loopback upstream, an opened private cache, and a ToolContext factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cache import Cache
from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import ToolContext
from tests.tools.retrieval.retrieval_upstream import Upstream

KEYS = {"SERPER_API_KEY": "serper-SECRET-1234", "SERPAPI_API_KEY": "serpapi-SECRET-5678",
        "OPENWEATHER_API_KEY": "owm-SECRET-9012"}


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = await Upstream().start()
    yield up
    await up.stop()


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
async def cache(tmp_path: Path) -> AsyncIterator[Cache]:
    async with Cache(tmp_path / "cache.sqlite") as c:
        yield c


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
def make_ctx(tmp_path: Path, http: aiohttp.ClientSession) -> Callable[..., ToolContext]:
    def make(fidelity: str = "reference", **services: Any) -> ToolContext:
        return ToolContext(blobs=BlobStore(tmp_path / "blobs"), task=Task(id="t", turns=[]), images=[],
                           fidelity=fidelity, services={"http": http, **services})
    return make


class Sleeps(list[float]):
    """Records the waits the retry loop asked for instead of sleeping (no wall-clock in tests)."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
