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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig
from fasteval.engine.batching import BatchLane, attach_lane
from fasteval.engine.clients import build_client, image_resolver, sim_models
from fasteval.images import ImageEncoder
from fasteval.runfolder.batch_journal import BatchJournal
from fasteval.runfolder.blobs import BlobStore
from fasteval.services.cache_http import response_cache
from fasteval.services.registry import start_services
from providers.breaker import BreakerPolicy
from providers.client import ModelClient
from providers.sim import SimServer

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
                       models: list[dict[str, Any]], roles: dict[str, dict[str, Any]], needed: set[str],
                       serving: Any = None, breaker: BreakerPolicy | None = None,
                       local_media_root: Path | None = None, used_keys: Path | None = None,
                       run_dir: Path | None = None, no_wait: bool = False) -> Runtime:
    """Start the sim, the encoder, every client and the ``needed`` services on ``stack``.

    Roles answer through the ``judge`` cache namespace (a summarizer caches whole summaries
    itself); evaluated models through ``model`` when that namespace is on. ``used_keys``: where
    the cache writes the keys this run touched, before it closes. ``run_dir``: where batched
    models journal their batches (``no_wait``: submit them and stop, fasteval.engine.batching).
    """
    sims = sim_models(models, roles)
    sim: SimServer | None = None
    if sims:
        sim = SimServer(sims, allowed_local_media_path=local_media_root)  # models with local_media: true
        await sim.start()
        stack.push_async_callback(sim.stop)
    encoder = ImageEncoder(blobs)
    stack.callback(encoder.close)
    rt = Runtime(encoder=encoder, sim=sim)
    sim_url = sim.base_url if sim else None
    for m in models:
        rt.clients[m["name"]] = client = build_client(m["name"], cfg.endpoint(m["name"]), sim_base_url=sim_url,
                                                      serving=serving,
                                                      resolver=image_resolver(encoder, spec=m), breaker=breaker)
        stack.push_async_callback(client.close)
    for role, spec in roles.items():
        rt.roles[role] = client = build_client(role, cfg.endpoint(role), sim_base_url=sim_url, serving=serving,
                                               resolver=image_resolver(encoder, spec=spec), breaker=breaker)
        stack.push_async_callback(client.close)
    batched = [(rt.clients[m["name"]], m) for m in models if m.get("batch")] + \
        [(rt.roles[r], spec) for r, spec in roles.items() if spec.get("batch")]
    if batched and run_dir is not None:
        journal = BatchJournal(run_dir)
        for client, spec in batched:
            lane = await attach_lane(stack, client, spec, journal, no_wait=no_wait)
            if lane is not None:
                rt.lanes[client.name] = lane
    if serving is not None:
        await serving.start()
        stack.push_async_callback(serving.close)
    services, closers = await start_services(needed, cfg.run)
    for closer in closers:
        stack.push_async_callback(closer)
    cache = services.get("cache")
    if cache is not None:
        if used_keys is not None:
            stack.push_async_callback(_write_used_keys, cache, used_keys)
        for role, client in rt.roles.items():
            if role != "summarizer":  # text_search_tool caches whole summaries itself
                client.cache = response_cache(cache, "judge", client)
        if cache.mode("model") != "off":
            for client in rt.clients.values():
                client.cache = response_cache(cache, "model", client)
    rt.services = {**services, **rt.roles}
    return rt


async def _write_used_keys(cache: Any, path: Path) -> None:
    """The keys this run read or wrote: ``fasteval cache export --run-dir`` ships exactly them."""
    try:
        await cache.write_used_keys(path)
    except OSError as e:
        log.warning("cannot write %s: %s", path.name, e)
