"""Experiment trackers: a run's scores to MLflow, Weights & Biases and TensorBoard (docs/export.md).

``send_run`` sends a finished run (``fasteval export RUN --to ...``); the sweep's ``log_to:`` runs
the same sinks live, in a worker process of their own (``fasteval.trackers.worker``), driven by
``fasteval.engine.steer.tracking``. Each tracker's library is an optional extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.config.log_to import TrackerSpec
    from fasteval.trackers.send import send_run
    from fasteval.trackers.sinks import MissingExtra, installed, open_sink

__getattr__, __all__ = lazy_face(__name__, {
    "fasteval.config.log_to": ["TrackerSpec"], "send": ["send_run"], "sinks": ["MissingExtra", "installed", "open_sink"],
})
