"""Running a sweep: plan, schedule, the agent loop, model clients, served models, preflight, rescore.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.engine.clients import build_client
    from fasteval.engine.plan import RunOptions, Selectors
    from fasteval.engine.preflight import preflight
    from fasteval.engine.rescore import rescore
    from fasteval.engine.sweep import Sweep, SweepResult, run_sweep
    from fasteval.engine.watch import WatchOptions, WatchResult, watch_sweep

__getattr__, __all__ = lazy_face("fasteval.engine", {
    "clients": ("build_client",),
    "preflight": ("preflight",),
    "plan": ("RunOptions", "Selectors"),
    "rescore": ("rescore",),
    "sweep": ("Sweep", "SweepResult", "run_sweep"),
    "watch": ("WatchOptions", "WatchResult", "watch_sweep"),
})
