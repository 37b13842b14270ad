"""One adapter per experiment tracker, each over the library's own client (an optional extra).

A sink logs named values at a step, a table, and tags naming the run's config fingerprint and
fasteval version; nothing else reaches the tracker (no record text, no prompt, no key, no
environment: W&B's console capture, git, code and machine metadata are switched off). A library
that is not installed is one line naming the extra to install (``MissingExtra``).

The sinks are synchronous (the libraries block): the live path runs them in a worker process of
their own (``fasteval.trackers.worker``), ``fasteval export --to`` in its own process.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any, Protocol

from fasteval.config.log_to import TrackerSpec
from fasteval.core.errors import UsageError

STEP_METRIC = "fasteval/step"
"""W&B's x axis for our values (``define_metric``): a training run logs its own steps, ours follow."""

_PACKAGES = {"mlflow": "mlflow", "wandb": "wandb", "tensorboard": "tensorboard"}


class MissingExtra(UsageError):
    """The tracker's library is not installed here."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind}: the {_PACKAGES[kind]} package is not installed; "
                         f"pip install 'fasteval[{kind}]'")


class TrackerUnavailable(RuntimeError, UsageError):
    """``export --to``: the tracker would not open its run (a wrong URI or run id, a server down).

    The library's own error, redacted and cut to one line: no traceback for a fault that is not ours.
    """

    def __init__(self, kind: str, exc: BaseException) -> None:
        from fasteval.core.redact import redact_text

        why = " ".join(redact_text(f"{type(exc).__name__}: {exc}").split())
        super().__init__(f"{kind}: could not open the tracker's run ({why[:300]})")


def _library(kind: str) -> Any:
    import importlib

    try:
        return importlib.import_module(_PACKAGES[kind])
    except ImportError:
        raise MissingExtra(kind) from None


def installed(kind: str) -> bool:
    """Whether the tracker's library can be imported (without importing it: they are heavy)."""
    import importlib.util

    return importlib.util.find_spec(_PACKAGES[kind]) is not None


_KEY = re.compile(r"[^A-Za-z0-9_\-./ :]+")


def metric_key(text: str) -> str:
    """A metric name every tracker takes (MLflow allows letters, digits, ``_-./ :``)."""
    return _KEY.sub("_", text)


class Sink(Protocol):
    kind: str
    run_id: str | None
    """The tracker's id of the run logged into (to resume it, or to name it to the user)."""

    def log(self, values: dict[str, float], step: int) -> None: ...

    def table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None: ...

    def tag(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...


class MlflowSink:
    kind = "mlflow"

    def __init__(self, spec: TrackerSpec, tags: dict[str, str], resume_id: str | None) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise MissingExtra("mlflow") from None
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines (schema migrations) are noise
        self.client = MlflowClient(tracking_uri=spec.uri)
        self.attached = spec.run_id is not None
        run_id = spec.run_id or resume_id
        if run_id is not None:
            self.client.get_run(run_id)  # a run that does not exist is an error here, not a new run
        else:
            name = spec.experiment or "fasteval"
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(name)
            run_id = self.client.create_run(exp_id, run_name=spec.run_name, tags=tags).info.run_id
        self.run_id: str | None = run_id
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)
        if not self.attached:
            self.client.update_run(run_id, status="RUNNING")

    def log(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        assert self.run_id is not None
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in values.items()])

    def table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        assert self.run_id is not None
        self.client.log_table(self.run_id, data={c: [r[i] for r in rows] for i, c in enumerate(columns)},
                              artifact_file=f"{name}.json")

    def tag(self, key: str, value: str) -> None:
        assert self.run_id is not None
        self.client.set_tag(self.run_id, key, value)

    def close(self) -> None:
        if not self.attached and self.run_id is not None:
            self.client.set_terminated(self.run_id)


class WandbSink:
    kind = "wandb"

    def __init__(self, spec: TrackerSpec, tags: dict[str, str], resume_id: str | None) -> None:
        wandb = _library("wandb")  # typed Any: its API's types move between releases
        self.wandb = wandb
        run_id = spec.run_id or resume_id
        settings = wandb.Settings(silent=True, console="off", disable_git=True, save_code=False,
                                  x_disable_stats=True, x_disable_meta=True, disable_job_creation=True,
                                  **({"mode": spec.mode} if spec.mode else {}))
        self.run = wandb.init(project=spec.project, entity=spec.entity, id=run_id,
                              resume="allow" if run_id else None, dir=spec.dir, name=spec.run_name,
                              config={"fasteval": tags}, settings=settings, reinit="create_new")
        self.run_id: str | None = self.run.id
        self.run.config.update({"fasteval": tags}, allow_val_change=True)
        self.run.define_metric(STEP_METRIC)
        self.defined: set[str] = set()

    def log(self, values: dict[str, float], step: int) -> None:
        for key in values.keys() - self.defined:
            self.run.define_metric(key, step_metric=STEP_METRIC)
            self.defined.add(key)
        self.run.log({**values, STEP_METRIC: step})

    def table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.run.log({name: self.wandb.Table(columns=list(columns), data=[list(r) for r in rows])})

    def tag(self, key: str, value: str) -> None:
        self.run.config.update({"fasteval": {**dict(self.run.config.get("fasteval") or {}), key: value}},
                               allow_val_change=True)

    def close(self) -> None:
        self.run.finish()


class TensorboardSink:
    kind = "tensorboard"

    def __init__(self, spec: TrackerSpec, tags: dict[str, str], resume_id: str | None) -> None:
        try:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary
            from tensorboard.plugins.text.summary_v2 import text_pb
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise MissingExtra("tensorboard") from None
        self.Event, self.Summary, self.text_pb = Event, Summary, text_pb
        self.writer = EventFileWriter(str(spec.logdir or "tensorboard"))
        self.run_id: str | None = None
        self.last_step = 0
        self.writer.add_event(Event(wall_time=time.time(), step=0, summary=text_pb(
            "fasteval/run", "\n".join(f"{k}: {v}" for k, v in sorted(tags.items())))))

    def log(self, values: dict[str, float], step: int) -> None:
        self.last_step = max(self.last_step, step)
        summary = self.Summary(value=[self.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()])
        self.writer.add_event(self.Event(wall_time=time.time(), step=step, summary=summary))

    def table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        def cell(v: Any) -> str:
            return "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v).replace("|", "\\|")

        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
        self.writer.add_event(self.Event(wall_time=time.time(), step=self.last_step,
                                         summary=self.text_pb(name, "\n".join(lines))))

    def tag(self, key: str, value: str) -> None:
        self.writer.add_event(self.Event(wall_time=time.time(), step=self.last_step,
                                         summary=self.text_pb(metric_key(key.replace(".", "/")), value)))

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


SINKS: dict[str, type[MlflowSink] | type[WandbSink] | type[TensorboardSink]] = {
    "mlflow": MlflowSink, "wandb": WandbSink, "tensorboard": TensorboardSink}


def open_sink(spec: TrackerSpec, tags: dict[str, str], resume_id: str | None = None) -> Sink:
    """The tracker's run, created (or resumed: ``resume_id``, a live run's earlier invocation; or
    attached: ``spec.run_id``); MissingExtra when its library is not installed."""
    return SINKS[spec.kind](spec, tags, resume_id)
