"""What a run tells a tracker, read from its run index: each group's headline, at its step, and the leaderboard.

A group (model × suite × setting) is logged as ``fasteval/<model>/<suite>/<setting>/{mean, std,
n_seeds, n_ok, n_error}``: the report's own numbers (``fasteval.core.headline``: the mean over seeds
of each seed's mean score, the between-seed std). A checkpoint of a series (``run7@2000``) is logged
under its series' name at its training step (``fasteval/run7/<suite>/<setting>/mean`` at step
2000), so the eval curve lands beside the training curves; every other model at step 0. The
leaderboard is a table with one row per group, and each model's average over its groups.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fasteval.config.series import SeriesSpec, series_of
from fasteval.core.headline import Headline, headline
from fasteval.core.version import fasteval_version
from fasteval.runfolder.index import RunIndex
from fasteval.trackers.sinks import metric_key

LEADERBOARD_COLUMNS = ("model", "suite", "setting", "step", "mean", "std", "n_seeds", "n_ok", "n_error")


def series_names(config: Any) -> set[str]:
    """The series entries of a config as written (a manifest's ``config``)."""
    models = config.get("models") if isinstance(config, dict) else None
    return {str(m["name"]) for m in models or [] if isinstance(m, dict) and "name" in m
            and SeriesSpec.of(m, Path(".")) is not None}


def label_and_step(model: str, series: set[str]) -> tuple[str, int]:
    """Where a model's values go: its series' name at the checkpoint's step, else its own name at 0."""
    found = series_of(model)
    if found is not None and found[0] in series:
        return found
    return model, 0


@dataclass(frozen=True, slots=True)
class GroupScore:
    model: str
    suite: str
    setting: str
    label: str
    step: int
    head: Headline

    def values(self) -> dict[str, float]:
        base = metric_key(f"fasteval/{self.label}/{self.suite}/{self.setting}")
        out: dict[str, float] = {f"{base}/n_seeds": self.head.n_seeds, f"{base}/n_ok": self.head.n_ok,
                                 f"{base}/n_error": self.head.n_error}
        if self.head.mean is not None and self.head.std is not None:
            out[f"{base}/mean"] = self.head.mean
            out[f"{base}/std"] = self.head.std
        return out


def group_score(index: RunIndex, model: str, suite: str, setting: str, series: set[str]) -> GroupScore:
    label, step = label_and_step(model, series)
    head = headline(index.select(("status", "score", "seed"), model=model, suite=suite, setting=setting))
    return GroupScore(model, suite, setting, label, step, head)


def group_scores(index: RunIndex, series: set[str], models: tuple[str, ...] = (),
                 suites: tuple[str, ...] = ()) -> Iterator[GroupScore]:
    """Every group of the run (within ``models`` and ``suites`` when given), in key order."""
    for model, suite, setting in sorted(index.group_sizes()):
        if (not models or model in models) and (not suites or suite in suites):
            yield group_score(index, model, suite, setting, series)


def leaderboard(scores: list[GroupScore]) -> tuple[list[list[Any]], dict[tuple[str, int], float]]:
    """The table's rows, and each model's average over its groups' means (by its label and step)."""
    rows = [[g.model, g.suite, g.setting, g.step, g.head.mean, g.head.std, g.head.n_seeds, g.head.n_ok,
             g.head.n_error] for g in scores]
    means: dict[tuple[str, int], list[float]] = {}
    for g in scores:
        if g.head.mean is not None:
            means.setdefault((g.label, g.step), []).append(g.head.mean)
    return rows, {k: statistics.fmean(v) for k, v in means.items()}


def average_values(averages: dict[tuple[str, int], float]) -> Iterator[tuple[int, dict[str, float]]]:
    """Each model's average as ``fasteval/<model>/average``, grouped by step."""
    by_step: dict[int, dict[str, float]] = {}
    for (label, step), value in sorted(averages.items()):
        by_step.setdefault(step, {})[metric_key(f"fasteval/{label}/average")] = value
    yield from sorted(by_step.items())


def run_tags(manifest: dict[str, Any], run_dir: Path) -> dict[str, str]:
    """What a tracker is told about the run: its folder, the config's name and fingerprint, our version."""
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    return {"fasteval.version": fasteval_version(), "fasteval.config_hash": str(manifest.get("config_hash")),
            "fasteval.run": run_dir.resolve().name, "fasteval.sweep": str((config or {}).get("name") or "")}
