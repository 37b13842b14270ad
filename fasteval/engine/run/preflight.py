"""Preflight: before the first job, every endpoint has its key, answers, and serves its model.

A missing key, a dead port or a misspelled model id would otherwise show up only inside the
records, one error per job, overnight. Each endpoint is checked once (``GET /v1/models`` or the
provider's equivalent, ``list_models``), all at the same time, and every problem is reported at
once: one line per endpoint. Embedded sim models need no check.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import SweepConfig
from fasteval.engine.run.clients import build_client
from providers import ProviderError

PREFLIGHT_TIMEOUT_S = 15.0


@dataclass(slots=True)
class Endpoint:
    """One config entry (a model or a role) that talks to a server."""

    label: str
    """``model gpt-4o`` or ``role judge``."""
    spec: EndpointSpec


def endpoints(cfg: SweepConfig) -> list[Endpoint]:
    # served models (``serve:``) do not exist yet: the sweep starts them and checks their readiness
    out = [Endpoint(f"model {m.name}", m) for m in cfg.models if not m.kind.embedded and m.serve is None]
    out += [Endpoint(f"role {r}", s) for r, s in cfg.roles.items() if not s.kind.embedded and s.serve is None]
    return out


async def check_endpoint(ep: Endpoint, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """None when the endpoint is ready, else one readable line saying what is wrong."""
    spec = ep.spec
    key_env = spec.key_env
    where = spec.base_url or spec.provider
    if key_env and not os.environ.get(key_env):
        return f"{ep.label} ({where}): the key variable {key_env} is not set"
    client = build_client(ep.label, spec, sim_base_url=None, resolver=None)
    if spec.batch is not None:
        problem = await _check_batch_api(ep, client.provider, where, timeout_s)
        if problem is not None:
            await client.close()
            return problem
    lister = getattr(client.provider, "list_models", None)
    model_id = spec.model
    try:
        if lister is None:
            return None  # a provider that cannot list its models is checked by its first request
        try:
            served = await asyncio.wait_for(lister(timeout_s=timeout_s), timeout_s + 1)
        except ProviderError as e:
            if e.status in (404, 405):
                return None  # a gateway without a model list: it answered, the first request checks the rest
            if e.kind == "auth":
                return f"{ep.label} ({where}): the key in {key_env or 'the environment'} was refused ({e.args[0]})"
            return f"{ep.label} ({where}): {e}"
        except TimeoutError:
            return f"{ep.label} ({where}): no answer within {timeout_s:g} s"
        if served and model_id not in served:
            listed = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
            return f"{ep.label} ({where}): the server does not serve {model_id!r} (it serves: {listed})"
        return None
    finally:
        await client.close()


async def _check_batch_api(ep: Endpoint, provider: Any, where: str, timeout_s: float) -> str | None:
    """A gateway behind ``provider: openai`` may have no batch API: refuse ``batch:`` before the run."""
    from providers import batch_wire

    wire = batch_wire(ep.spec.wire, provider)
    try:
        await asyncio.wait_for(wire.probe(), timeout_s)
    except ProviderError as e:
        if e.status in (404, 405):
            return f"{ep.label} ({where}): batch: true, but the endpoint has no batch API ({e.status})"
        return f"{ep.label} ({where}): batch API: {e}"
    except TimeoutError:
        return f"{ep.label} ({where}): the batch API did not answer within {timeout_s:g} s"
    finally:
        await wire.close()
    return None


async def preflight(cfg: SweepConfig, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> list[str]:
    """Every endpoint's problem, one line each; empty when all are ready."""
    found = await asyncio.gather(*(check_endpoint(ep, timeout_s) for ep in endpoints(cfg)))
    return [line for line in found if line]
