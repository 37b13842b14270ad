"""``log_to:``: the experiment trackers a sweep reports its scores to as it runs, typed once at load.

MLflow (a tracking URI; MLflow's own default, a SQLite file ``mlflow.db`` in the current folder,
when none is given), Weights & Biases (project, entity, and a run id to log into a training run's
own run; ``mode: offline`` writes a local run to sync later) and TensorBoard (a log folder). Like
``notify:``, a tracker is how a run is watched, not what it computes: changing it never makes a run
folder's config "changed", and a tracker that fails or hangs never changes the run's outcome.
``fasteval export RUN --to ...`` builds the same ``TrackerSpec`` from its flags.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from fasteval.core.options import Opt

TrackerKind = Literal["mlflow", "wandb", "tensorboard"]
KINDS: tuple[TrackerKind, ...] = ("mlflow", "wandb", "tensorboard")

LOG_TO_OPTIONS: dict[str, Opt] = {
    "mlflow": Opt("dict", "MLflow ({} for its defaults)", fields={
        "uri": Opt("str", "tracking URI (default: $MLFLOW_TRACKING_URI, else MLflow's default sqlite:///mlflow.db)"),
        "experiment": Opt("str", "experiment name (default: the config's name)"),
        "run_id": Opt("str", "log into this existing run (a training run's own)"),
        "run_name": Opt("str", "the run's name (default: the run folder's name)")}),
    "wandb": Opt("dict", "Weights & Biases ({} for its defaults)", fields={
        "project": Opt("str", "project (default: the config's name)"),
        "entity": Opt("str", "entity: a team or user"),
        "run_id": Opt("str", "log into this existing run (a training run's own)"),
        "mode": Opt("str", "online, offline (a local run `wandb sync` uploads later) or shared (the trainer writes the "
                     "same run)", choices=("online", "offline", "shared")),
        "dir": Opt("path", "where W&B keeps its local files (default: its own, ./wandb)")}),
    "tensorboard": Opt("dict", "TensorBoard", fields={
        "logdir": Opt("path", "the log folder (default: tensorboard/ beside the config)")}),
    "timeout_s": Opt("float", "seconds the trackers may take to finish after the sweep before they are abandoned "
                     "(default 60)"),
}


@dataclass(frozen=True, slots=True)
class TrackerSpec:
    """One tracker: its kind and the fields that kind reads (the others stay None)."""

    kind: TrackerKind
    uri: str | None = None
    experiment: str | None = None
    project: str | None = None
    entity: str | None = None
    run_id: str | None = None
    run_name: str | None = None
    mode: str | None = None
    dir: str | None = None
    logdir: str | None = None

    def named(self, default: str) -> TrackerSpec:
        """This spec with ``default`` (the config's name) as its experiment or project when it has none."""
        if self.kind == "mlflow" and not self.experiment:
            return replace(self, experiment=default)
        if self.kind == "wandb" and not self.project:
            return replace(self, project=default)
        return self

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if getattr(self, k) is not None}


@dataclass(frozen=True, slots=True)
class LogTo:
    trackers: tuple[TrackerSpec, ...]
    timeout_s: float = 60.0


def log_to_problems(spec: Any) -> list[tuple[str, str]]:
    """(key, message) for each problem the schema's types do not catch."""
    if not isinstance(spec, dict):
        return []
    out: list[tuple[str, str]] = []
    if not any(k in spec for k in KINDS):
        out.append(("", f"name at least one tracker: {', '.join(KINDS)}"))
    timeout = spec.get("timeout_s")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout <= 0:
        out.append(("timeout_s", f"must be positive, got {timeout}"))
    return out


def log_to_spec(spec: dict[str, Any] | None, base: Path) -> LogTo | None:
    """The typed trackers of a validated ``log_to:`` entry (None when the config has none).

    Paths are resolved against ``base``, the config file's folder, as every path of a config is.
    """
    if not spec:
        return None
    trackers = []
    for kind in KINDS:
        entry = spec.get(kind)
        if not isinstance(entry, dict):
            continue
        fields = {k: str(v) for k, v in entry.items() if v is not None}
        for key in ("dir", "logdir"):
            if key in fields:
                fields[key] = str((base / fields[key]).resolve())
        if kind == "tensorboard" and "logdir" not in fields:
            fields["logdir"] = str((base / "tensorboard").resolve())
        trackers.append(TrackerSpec(kind=kind, **fields))
    return LogTo(tuple(trackers), float(spec.get("timeout_s", 60.0)))
