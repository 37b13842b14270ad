"""The byte budget for in-flight request bodies holds, measured where it matters: the sim
server records the peak bytes of request bodies it is handling at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fasteval.config.endpoint import EndpointSpec
from fasteval.engine.run.clients import build_client, image_resolver
from fasteval.images import ImageEncoder
from fasteval.runfolder.blobs import BlobStore
from providers.base import ChatRequest
from providers.body import ByteBudget
from providers.sim import SimModel, SimServer


def _blobs_with_images(tmp_path: Path, n: int, side: int) -> tuple[BlobStore, list[str]]:
    blobs = BlobStore(tmp_path / "blobs")
    refs = []
    for i in range(n):
        pixels = np.random.default_rng(i).integers(0, 256, size=(side, side, 3), dtype=np.uint8)
        path = tmp_path / f"{i}.png"
        Image.fromarray(pixels, "RGB").save(path, "PNG")
        refs.append(blobs.put(path.read_bytes()))
    return blobs, refs


async def _burst(tmp_path: Path, max_body_mb: float | None, n: int = 12) -> tuple[int, int]:
    """n concurrent requests with a ~110 KB image each; returns (sim peak bytes, one body's size)."""
    blobs, refs = _blobs_with_images(tmp_path, n, 190)
    sim = SimServer([SimModel("m", policy="direct", latency_ms=60)])
    await sim.start()
    encoder = ImageEncoder(blobs)
    limits = {"concurrency": 64} | ({"max_body_mb": max_body_mb} if max_body_mb else {})
    spec = EndpointSpec.of("m", {"provider": "sim", "limits": limits})
    client = build_client("m", spec, sim_base_url=sim.base_url, resolver=image_resolver(encoder, spec=spec))
    try:
        reqs = [ChatRequest(messages=[{"role": "user", "content": [{"type": "image", "image": r},
                                                                   {"type": "text", "text": "hi"}]}])
                for r in refs]
        sizes = [sum(len(p) for p in await client.provider.build_body(q)) for q in reqs]  # type: ignore[attr-defined]
        await asyncio.gather(*(client.chat(q) for q in reqs))
        budget = client.provider.body_budget  # type: ignore[attr-defined]
        assert budget.in_flight == 0  # every byte given back
        return sim.max_bytes_in_flight, max(sizes)
    finally:
        await client.close()
        encoder.close()
        await sim.stop()


async def test_byte_budget_bounds_the_bodies_the_server_holds_at_once(tmp_path: Path) -> None:
    budget_mb = 0.35
    peak, body = await _burst(tmp_path / "a", budget_mb)
    assert body > 100_000
    assert body <= peak <= budget_mb * 1024 * 1024


async def test_without_a_tight_budget_the_burst_goes_out_at_once(tmp_path: Path) -> None:
    # the control: the same burst under the default budget exceeds the tight one above
    peak, body = await _burst(tmp_path / "b", None)
    assert peak > 0.35 * 1024 * 1024 and peak >= 6 * body


async def test_a_body_larger_than_the_budget_goes_alone() -> None:
    budget = ByteBudget(100)
    await budget.acquire(40)
    big = asyncio.create_task(budget.acquire(500))
    small = asyncio.create_task(budget.acquire(10))  # queued behind the big one: no starvation
    await asyncio.sleep(0)
    assert not big.done() and not small.done()
    budget.release(40)
    await asyncio.wait_for(big, 1)
    assert budget.in_flight == 500 and not small.done()
    budget.release(500)
    await asyncio.wait_for(small, 1)
    assert budget.peak == 500 and budget.in_flight == 10


async def test_a_cancelled_waiter_gives_nothing_away() -> None:
    budget = ByteBudget(100)
    await budget.acquire(90)
    waiter = asyncio.create_task(budget.acquire(50))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    budget.release(90)
    assert budget.in_flight == 0
    await asyncio.wait_for(budget.acquire(100), 1)


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        ByteBudget(0)
