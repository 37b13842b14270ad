"""Running a sweep, in rooms by concern; each room imports only the floors below it.

- ``offline/``: commands over a finished or stopped run (rescore, watch mode, batch admin);
- ``run/``: the hot path (the sweep, admission, a job's life, the agent loop, clients, served
  models, the run's runtime, preflight, the progress panel);
- ``steer/`` · ``batch/`` · ``forecast/`` (siblings): live control and notifications; batch lanes;
  the dry run and the estimate;
- the floor: ``plan.py`` (what a run holds) and ``ledger.py`` (how a run's jobs are counted).

The names below load their module on first use, so importing one part never imports the rest.
A sweep is not started from here: ``fasteval.api`` is the one run path (``run``, ``run_planned``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.engine.offline.rescore import rescore
    from fasteval.engine.offline.watch import WatchOptions, WatchResult, watch_sweep
    from fasteval.engine.plan import RunOptions, Selectors
    from fasteval.engine.run.clients import build_client
    from fasteval.engine.run.preflight import preflight
    from fasteval.engine.run.sweep import SweepResult

__getattr__, __all__ = lazy_face("fasteval.engine", {
    "fasteval.engine.run.clients": ("build_client",),
    "fasteval.engine.run.preflight": ("preflight",),
    "plan": ("RunOptions", "Selectors"),
    "fasteval.engine.offline.rescore": ("rescore",),
    "fasteval.engine.run.sweep": ("SweepResult",),
    "fasteval.engine.offline.watch": ("WatchOptions", "WatchResult", "watch_sweep"),
})
