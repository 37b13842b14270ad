"""A run folder's batches from outside a run: listed from the journal, cancelled on purpose.

``fasteval batches cancel RUN`` cancels every open batch at its provider (a cancel can take
minutes), waits for each to end, and still downloads its partial results: they are paid for.
Requests that were cancelled count as not succeeded, so a later ``fasteval run`` resubmits them.
It acts only on batches provably ours (a journaled id, or a mark we set), never submits one, and
waits only for batches whose cancel the provider accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import SweepConfig
from fasteval.core.errors import DamagedRunFolder
from fasteval.engine.batch.batching import BatchLane
from fasteval.engine.run.clients import build_client
from fasteval.runfolder.batch_journal import BatchJournal, JournalBatch
from fasteval.runfolder.names import MANIFEST
from fasteval.runfolder.records import read_manifest
from providers import BatchSettings, ProviderError, batch_wire


def batched_specs(cfg: SweepConfig) -> list[EndpointSpec]:
    """The batched models and roles of a config (the run's manifest's, or one the user passed)."""
    return [ep for ep in [*cfg.models, *cfg.roles.values()] if ep.batch is not None]


def manifest_specs(run_dir: Path) -> list[EndpointSpec]:
    """``batched_specs`` of the run's manifest: input anyone who can write the folder wrote
    (DamagedRunFolder, exit 2, for an entry that cannot be typed)."""
    config = (read_manifest(run_dir) or {}).get("config") or {}
    try:
        specs = [EndpointSpec.of(str(m["name"]), m) for m in config.get("models") or []
                 if isinstance(m, dict) and m.get("batch")]
        return specs + [EndpointSpec.of(str(r), s) for r, s in (config.get("roles") or {}).items()
                        if isinstance(s, dict) and s.get("batch")]
    except (KeyError, ValueError, AttributeError) as e:  # EndpointSpec.of's word for an entry it cannot type
        raise DamagedRunFolder(f"{run_dir / MANIFEST}: {e.args[0] if e.args else e}") from None


async def cancel_batches(run_dir: Path, specs: list[EndpointSpec], *, poll_s: float = 5.0,
                         say: Any = print) -> tuple[int, int]:
    """Cancel every open batch of the run at the endpoints ``specs`` name (checked by the caller: the
    manifest's are not trusted blindly) and collect what they finished: (cancelled, results kept)."""
    journal = BatchJournal(run_dir)
    open_ = {b.lane for b in journal.open_batches()}
    cancelled = 0
    mine: dict[str, set[str]] = {}
    """Per lane, the batches cancelled here: only those are waited for (never one whose cancel failed)."""
    kept_before = sum(1 for st in journal.requests.values() if st.ok)
    async with contextlib.AsyncExitStack() as stack:
        lanes: list[BatchLane] = []
        for spec in specs:
            if spec.name not in open_:
                continue
            if spec.kind.embedded:
                say(f"model {spec.name}: its batches were at the run's embedded sim, which ended with the run")
                continue
            client = build_client(spec.name, spec, sim_base_url=None, resolver=None)
            stack.push_async_callback(client.close)
            settings = spec.batch or BatchSettings()
            lane = BatchLane(spec.name, batch_wire(spec.wire, client.provider), journal,
                             BatchSettings(gather_s=settings.gather_s, poll_s=poll_s))
            stack.push_async_callback(lane.close)
            lanes.append(lane)
            for b in journal.open_batches(lane.name):
                if await _cancel_one(lane, journal, b, say):
                    cancelled += 1
                    mine.setdefault(lane.name, set()).add(b.local)
        if cancelled:
            say(f"{cancelled} batch(es) cancelling: a cancel can take minutes; collecting their partial results "
                "(they are paid for)")
        await asyncio.gather(*(lane.reattach(mine[lane.name]) for lane in lanes if lane.name in mine))
        await asyncio.gather(*(lane.drained() for lane in lanes))
    kept = sum(1 for st in journal.requests.values() if st.ok) - kept_before
    return cancelled, kept


async def _cancel_one(lane: BatchLane, journal: BatchJournal, b: JournalBatch, say: Any) -> bool:
    """Cancel one open batch that is provably ours; whether a cancel was accepted."""
    bid = b.batch_id
    if bid is None and not lane.wire.find_proves:  # only a guess (request count and time) could find it
        say(f"model {lane.name}: batch {b.local} may have been created just before a crash; {lane.wire.name} "
            "batches carry no mark of ours, so it is not looked for or cancelled here: a rerun confirms it by "
            "its requests' ids")
        return False
    if bid is None:
        try:
            bid = await lane.wire.find(b.local, b.at, len(b.ids), journal.claimed())
        except ProviderError as e:
            say(f"model {lane.name}: cannot tell whether batch {b.local} was created ({e}); nothing cancelled")
            return False
        if bid is None:  # never created: nothing to cancel, its requests are simply not done
            await journal.results(b.local, [], ended="never_created")
            return False
        await journal.created(b.local, bid)
    try:
        info = await lane.wire.cancel(bid)
    except ProviderError as e:
        say(f"model {lane.name}: cancelling {bid} failed: {e}; it is left as it is (a rerun collects it)")
        return False
    say(f"model {lane.name}: {bid} {info.status}")
    return True
