"""Sending a run's scores to a tracker: ``fasteval export RUN --to ...`` and the live worker's steps.

Both log through the same two functions, so a run sent after the fact and one logged while it ran
hold the same values under the same names at the same steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fasteval.config.log_to import TrackerSpec
from fasteval.core.errors import UsageError
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.records import read_manifest
from fasteval.trackers.scores import (
    LEADERBOARD_COLUMNS,
    GroupScore,
    average_values,
    group_scores,
    leaderboard,
    run_tags,
    series_names,
)
from fasteval.trackers.sinks import Sink, TrackerUnavailable, open_sink

LEADERBOARD = "fasteval/leaderboard"


def log_groups(sink: Sink, scores: Iterable[GroupScore]) -> int:
    """Each group's values at its step; how many values were logged."""
    n = 0
    for g in scores:
        values = g.values()
        sink.log(values, g.step)
        n += len(values)
    return n


def log_leaderboard(sink: Sink, scores: list[GroupScore], partial: bool) -> int:
    """The leaderboard table and each model's average (at its step), and whether the run is partial
    (``fasteval.partial``); how many values were logged."""
    rows, averages = leaderboard(scores)
    n = 0
    for step, values in average_values(averages):
        sink.log(values, step)
        n += len(values)
    sink.table(LEADERBOARD, LEADERBOARD_COLUMNS, rows)
    sink.tag("fasteval.partial", str(partial).lower())
    return n


def is_partial(manifest: dict[str, Any], index: RunIndex) -> bool:
    """The plan holds jobs without a record: the numbers are a partial run's."""
    planned = (manifest.get("plan") or {}).get("total")
    return isinstance(planned, int) and index.count() < planned


def send_run(run_dir: Path, spec: TrackerSpec, *, models: tuple[str, ...] = (),
             suites: tuple[str, ...] = ()) -> dict[str, Any]:
    """Send a finished (or partial) run's scores and leaderboard to one tracker."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise UsageError(f"{run_dir} is not a run folder (no manifest.json)")
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    series = series_names(config)
    with open_index(run_dir) as index, index.snapshot():
        scores = list(group_scores(index, series, models, suites))
        partial = is_partial(manifest, index)
    try:
        sink = open_sink(spec.named(str((config or {}).get("name") or run_dir.resolve().name)),
                         run_tags(manifest, run_dir))
    except UsageError:
        raise
    except Exception as e:  # the tracker library's own fault (its client, its server): one line, exit 2
        raise TrackerUnavailable(spec.kind, e) from e
    try:
        n = log_groups(sink, scores) + log_leaderboard(sink, scores, partial)
    finally:
        sink.close()
    return {"to": spec.kind, "groups": len(scores), "metrics": n, "run_id": sink.run_id, "partial": partial}
