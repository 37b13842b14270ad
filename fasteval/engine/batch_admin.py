"""A run folder's batches from outside a run: listed from the journal, cancelled on purpose.

``fasteval batches cancel RUN`` cancels every open batch at its provider (a cancel can take
minutes), waits for each to end, and still downloads its partial results: they are paid for.
Requests that were cancelled count as not succeeded, so a later ``fasteval run`` resubmits them.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from fasteval.engine.batching import BatchLane
from fasteval.engine.clients import build_client
from fasteval.runfolder.batch_journal import BatchJournal
from fasteval.runfolder.records import read_manifest
from providers.base import ProviderError
from providers.batch.base import BatchSettings
from providers.batch.wires import wire_for
from providers.registry import is_embedded


def _batched_specs(run_dir: Path) -> list[dict[str, Any]]:
    manifest = read_manifest(run_dir) or {}
    cfg = manifest.get("config") or {}
    specs = [m for m in cfg.get("models") or [] if isinstance(m, dict) and m.get("batch")]
    specs += [{**s, "name": r} for r, s in (cfg.get("roles") or {}).items() if isinstance(s, dict) and s.get("batch")]
    return specs


async def cancel_batches(run_dir: Path, *, poll_s: float = 5.0, say: Any = print) -> tuple[int, int]:
    """Cancel every open batch of the run and collect what it finished: (cancelled, results kept)."""
    journal = BatchJournal(run_dir)
    open_ = {b.lane for b in journal.open_batches()}
    cancelled = 0
    kept_before = sum(1 for st in journal.requests.values() if st.ok)
    async with contextlib.AsyncExitStack() as stack:
        lanes: list[BatchLane] = []
        for spec in _batched_specs(run_dir):
            if spec["name"] not in open_:
                continue
            if is_embedded(spec):
                say(f"model {spec['name']}: its batches were at the run's embedded sim, which ended with the run")
                continue
            client = build_client(spec["name"], spec, sim_base_url=None, resolver=None)
            stack.push_async_callback(client.close)
            settings = BatchSettings.from_config(spec["batch"]) or BatchSettings()
            lane = BatchLane(spec["name"], wire_for(client.provider), journal,
                             BatchSettings(gather_s=settings.gather_s, poll_s=poll_s))
            stack.push_async_callback(lane.close)
            lanes.append(lane)
            for b in journal.open_batches(lane.name):
                bid = b.batch_id or await lane.wire.find(b.local, b.at, len(b.ids), journal.claimed())
                if bid is None:  # never created: nothing to cancel, its requests are simply not done
                    await journal.results(b.local, [], ended="never_created")
                    continue
                if b.batch_id is None:
                    await journal.created(b.local, bid)
                try:
                    info = await lane.wire.cancel(bid)
                except ProviderError as e:
                    say(f"model {lane.name}: cancelling {bid} failed: {e}")
                    continue
                cancelled += 1
                say(f"model {lane.name}: {bid} {info.status}")
        if cancelled:
            say(f"{cancelled} batch(es) cancelling: a cancel can take minutes; collecting their partial results "
                "(they are paid for)")
        await asyncio.gather(*(lane.reattach() for lane in lanes))
        await asyncio.gather(*(lane.drained() for lane in lanes))
    kept = sum(1 for st in journal.requests.values() if st.ok) - kept_before
    return cancelled, kept
