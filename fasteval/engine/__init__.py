"""Running a sweep: plan, schedule, the agent loop, model clients, served models, preflight, rescore.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.engine.clients import build_client
    from fasteval.engine.preflight import preflight
    from fasteval.engine.rescore import rescore
    from fasteval.engine.sweep import RunOptions, Selectors, Sweep, SweepResult, run_sweep

_WHERE = {
    "build_client": "fasteval.engine.clients",
    "preflight": "fasteval.engine.preflight",
    "rescore": "fasteval.engine.rescore",
    "RunOptions": "fasteval.engine.sweep",
    "Selectors": "fasteval.engine.sweep",
    "Sweep": "fasteval.engine.sweep",
    "SweepResult": "fasteval.engine.sweep",
    "run_sweep": "fasteval.engine.sweep",
}

__all__ = ["RunOptions", "Selectors", "Sweep", "SweepResult", "build_client", "preflight", "rescore", "run_sweep"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'fasteval.engine' has no attribute {name!r}")
