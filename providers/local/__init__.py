"""Locally served models: fasteval starts, supervises, routes to and stops their servers (vLLM by default).

The names below load on first use: ``fasteval.config.load`` reads only ``providers.local.spec``, and
the package's routing and supervision pull in aiohttp, which a ``status`` or ``report`` never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.breaker import EndpointDown
    from providers.local.fingerprint import checkpoint_identity
    from providers.local.gpus import GpuConfigError, GpuPool, detect_gpus
    from providers.local.metrics import parse_metrics
    from providers.local.routing import RoutedProvider, Router
    from providers.local.spec import ServeConfigError, ServeSpec
    from providers.local.supervisor import Replica, ServerGroup, ServerStartError

_HOMES = {"EndpointDown": "providers.breaker", "checkpoint_identity": "providers.local.fingerprint",
          "GpuConfigError": "providers.local.gpus", "GpuPool": "providers.local.gpus",
          "detect_gpus": "providers.local.gpus", "RoutedProvider": "providers.local.routing",
          "Router": "providers.local.routing", "parse_metrics": "providers.local.metrics",
          "ServeConfigError": "providers.local.spec",
          "ServeSpec": "providers.local.spec", "Replica": "providers.local.supervisor",
          "ServerGroup": "providers.local.supervisor", "ServerStartError": "providers.local.supervisor"}

__all__ = ["EndpointDown", "GpuConfigError", "GpuPool", "Replica", "RoutedProvider", "Router", "ServeConfigError",
           "ServeSpec", "ServerGroup", "ServerStartError", "checkpoint_identity", "detect_gpus", "parse_metrics"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'providers.local' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
