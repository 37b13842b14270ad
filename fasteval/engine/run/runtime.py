"""What a sweep or a rescore runs on, built and torn down in one place.

A run needs the embedded sim (for ``provider: sim`` endpoints), an image encoder, one client
per model and role, and the services their tools ask for. Each is entered on one
``contextlib.AsyncExitStack`` the moment it exists, so whatever stops the run (the end, an
error, Ctrl-C) closes exactly what was opened, in reverse order, and a new resource is added
in one line rather than in a hand-written ``finally`` per caller.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import SweepConfig
from fasteval.engine.batch.batching import BatchLane, batch_lane
from fasteval.engine.run.clients import CacheHook, build_client, image_resolver, sim_models
from fasteval.images import ImageEncoder
from fasteval.runfolder.batch_journal import BatchJournal
from fasteval.runfolder.blobs import BlobStore
from fasteval.services.cache_http import response_cache
from fasteval.services.registry import start_services
from providers import BreakerPolicy, ModelClient, RequestGate, SimServer

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    """The open resources of one run; closed by the exit stack it was built on."""

    encoder: ImageEncoder
    clients: dict[str, ModelClient] = field(default_factory=dict)
    roles: dict[str, ModelClient] = field(default_factory=dict)
    services: dict[str, Any] = field(default_factory=dict)
    sim: SimServer | None = None
    lanes: dict[str, BatchLane] = field(default_factory=dict)
    """Batched models and roles (``batch:``), by name."""


async def open_runtime(stack: contextlib.AsyncExitStack, blobs: BlobStore, cfg: SweepConfig, *,
                       models: list[EndpointSpec], roles: dict[str, EndpointSpec], needed: set[str],
                       serving: Any = None, breaker: BreakerPolicy | None = None,
                       local_media_root: Path | None = None, used_keys: Path | None = None,
                       run_dir: Path | None = None, no_wait: bool = False, gate: RequestGate | None = None,
                       say: Callable[[str], None] | None = None) -> Runtime:
    """Start the sim, the encoder, the cache, every client and the other ``needed`` services on ``stack``.

    Each client is built whole (``build_client``): roles answer through the ``judge`` cache
    namespace (a summarizer caches whole summaries itself), evaluated models through ``model``
    when that namespace is on, a batched entry gets its lane, and every client the sweep's pause
    ``gate``. ``used_keys``: where the cache writes the keys this run touched, before it closes.
    ``run_dir``: where batched models journal their batches (``no_wait``: submit them and stop,
    fasteval.engine.batch.batching). ``say`` is told what starts, as it starts (``ctl status``).
    """
    tell = say or (lambda _: None)
    sims = sim_models([*models, *roles.values()])
    sim: SimServer | None = None
    if sims:
        tell("starting the embedded sim")
        sim = SimServer(sims, allowed_local_media_path=local_media_root)  # models with local_media: true
        await sim.start()
        stack.push_async_callback(sim.stop)
    encoder = ImageEncoder(blobs)
    stack.callback(encoder.close)
    rt = Runtime(encoder=encoder, sim=sim)
    if "cache" in needed:
        tell("opening the cache")
    cache = (await _start(stack, {"cache"} & needed, cfg, rt)).get("cache")
    if cache is not None and used_keys is not None:
        stack.push_async_callback(_write_used_keys, cache, used_keys)
    journal = BatchJournal(run_dir) if run_dir is not None and any(ep.batch for ep in [*models, *roles.values()]) \
        else None
    sim_url = sim.base_url if sim else None
    tell("building the model clients")
    for table, entries, namespace in ((rt.clients, {m.name: m for m in models}, "model"), (rt.roles, roles, "judge")):
        for name, ep in entries.items():
            table[name] = client = build_client(
                name, ep, sim_base_url=sim_url, serving=serving, resolver=image_resolver(encoder, spec=ep),
                breaker=breaker, cache=_cache_hook(cache, namespace, name),
                batch=batch_lane(ep.batch, journal, ep.wire, no_wait=no_wait) if ep.batch and journal else None,
                gate=gate)
            stack.push_async_callback(client.close)
            if isinstance(client.lane, BatchLane):
                rt.lanes[name] = client.lane
                stack.push_async_callback(client.lane.close)
    specs = {**{m.name: m for m in models}, **roles}
    for lane in rt.lanes.values():
        if journal is not None and specs[lane.name].kind.embedded:
            # An earlier run's embedded sim held its batches in that process: they ended with it (polled,
            # they are unknown for ever). Ended as expired, their requests go into a new batch, as an
            # expired batch's do; the sim bills nothing, so nothing is paid twice.
            for jb in journal.open_batches(lane.name):
                await journal.results(jb.local, [], ended="expired")
            continue
        tell(f"reattaching {lane.name}'s batches")
        n = await lane.reattach()
        if n:
            log.info("model %s: reattached to %d batch(es) from an earlier run", lane.name, n)
    if serving is not None:
        tell(f"starting served models ({', '.join(serving.order + sorted(serving.roles)) or 'none'})")
        await serving.start()
        stack.push_async_callback(serving.close)
    if needed - {"cache"}:
        tell(f"starting services ({', '.join(sorted(needed - {'cache'}))})")
    await _start(stack, needed - {"cache"}, cfg, rt)
    rt.services = {**rt.services, **rt.roles}
    return rt


def _cache_hook(cache: Any, namespace: str, name: str) -> CacheHook | None:
    """Models through the ``model`` namespace when it is on; roles through ``judge``, except a
    summarizer (text_search_tool caches its whole summaries itself)."""
    if cache is None or (cache.mode("model") == "off" if namespace == "model" else name == "summarizer"):
        return None
    return partial(response_cache, cache, namespace)


async def _start(stack: contextlib.AsyncExitStack, names: set[str], cfg: SweepConfig, rt: Runtime) -> dict[str, Any]:
    """Start services on ``stack`` (each closed when the run ends) and add them to ``rt.services``."""
    services, closers = await start_services(names, cfg.run.service_options())
    for closer in closers:
        stack.push_async_callback(closer)
    rt.services.update(services)
    return services


async def _write_used_keys(cache: Any, path: Path) -> None:
    """The keys this run read or wrote: ``fasteval cache export --run-dir`` ships exactly them."""
    try:
        await cache.write_used_keys(path)
    except OSError as e:
        log.warning("cannot write %s: %s", path.name, e)
