"""Scores the benchmarks' papers published, so a leaderboard can put them beside ours.

The shipped numbers live in ``published.yaml`` next to this module, each with its paper and
table: only numbers read in a paper or in its official repository's README, never estimated
from a figure. A sweep config may add its own under ``published:`` (same fields; checked by the
config validator against ``PUBLISHED_FIELDS``), which the report reads back from the run's
manifest. Values are percentages as the papers print them; ``PublishedScore.fraction`` is on our
0..1 scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fasteval.core.errors import ConfigError
from fasteval.core.options import Opt

SHIPPED = Path(__file__).with_name("published.yaml")

PUBLISHED_FIELDS: dict[str, Opt] = {
    "suite": Opt("str", "our suite name (vistahop, tirbench, ...)", required=True),
    "setting": Opt("str", "our setting name the paper's setting corresponds to", required=True),
    "model": Opt("str", "the model as the paper names it", required=True),
    "match": Opt("str_list", "our model names or endpoint model ids this row stands for (case-insensitive)",
                 required=True),
    "value": Opt("float", "the published score in percent, as printed", required=True),
    "paper": Opt("str", "the paper (short title, venue or arXiv id)", required=True),
    "table": Opt("str", "where in the paper: 'Table 3', 'Table 2, p. 9', 'README table'", required=True),
    "metric": Opt("str", "the paper's name for the number (Pass@1, APR, All)"),
    "note": Opt("str", "how the paper's setting differs from ours, if it does"),
    "options": Opt("dict", "suite options the number was measured with, e.g. {version: 8k}: shown only beside a "
                   "run whose suite entry has them (an option the entry leaves out takes the suite's default)"),
}
"""The fields of one published number, shared by the shipped file and a config's ``published:``."""


@dataclass(frozen=True, slots=True)
class PublishedScore:
    """One number a paper printed for one model in one setting of one suite."""

    suite: str
    setting: str
    model: str
    match: tuple[str, ...]
    value: float
    paper: str
    table: str
    metric: str = ""
    note: str = ""
    origin: str = "shipped"
    """``shipped`` (fasteval's published.yaml) or ``config`` (the sweep's own ``published:``)."""
    options: tuple[tuple[str, str], ...] = ()
    """Suite options the number needs (HR-Bench's ``version``), as text: 4K and 8K share setting names."""

    @property
    def fraction(self) -> float:
        return self.value / 100.0

    def matches(self, names: Iterable[str]) -> bool:
        wanted = {m.lower() for m in self.match}
        return any(n.lower() in wanted for n in names)

    def fits(self, entry_options: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
        """Whether a run's suite entry was run as the paper's number was (its options, else the defaults)."""
        return all(str(entry_options.get(k, defaults.get(k))).lower() == v.lower() for k, v in self.options)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "value": self.fraction, "paper": self.paper, "table": self.table,
                "metric": self.metric or None, "note": self.note or None, "origin": self.origin}


def published_score(entry: Mapping[str, Any], origin: str) -> PublishedScore:
    """One entry typed (a ConfigError, exit 2, naming the missing or mistyped field)."""
    missing = [k for k, opt in PUBLISHED_FIELDS.items() if opt.required and k not in entry]
    unknown = sorted(set(entry) - set(PUBLISHED_FIELDS))
    if missing or unknown:
        raise ConfigError(f"published entry {dict(entry)!r}: "
                         + "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                                     + ([f"unknown {', '.join(unknown)}"] if unknown else [])))
    value = entry["value"]
    match = entry["match"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise ConfigError(f"published entry for {entry['model']!r}: value must be a percentage, got {value!r}")
    if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
        raise ConfigError(f"published entry for {entry['model']!r}: match must be a list of names")
    options = entry.get("options") or {}
    if not isinstance(options, Mapping) or not all(isinstance(v, str | int | float) for v in options.values()):
        raise ConfigError(f"published entry for {entry['model']!r}: options must map option names to values")
    return PublishedScore(suite=str(entry["suite"]), setting=str(entry["setting"]), model=str(entry["model"]),
                          match=tuple(match), value=float(value), paper=str(entry["paper"]),
                          table=str(entry["table"]), metric=str(entry.get("metric") or ""),
                          note=str(entry.get("note") or ""), origin=origin,
                          options=tuple(sorted((str(k), str(v)) for k, v in options.items())))


@cache
def shipped_scores() -> tuple[PublishedScore, ...]:
    """The numbers fasteval ships (read once per process)."""
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8")) or []
    try:
        return tuple(published_score(e, "shipped") for e in data)
    except ValueError as e:  # our own file: a broken entry is our bug, said plainly
        raise ConfigError(f"{SHIPPED}: {e}") from None


def config_scores(config: Mapping[str, Any]) -> list[PublishedScore]:
    """A config's own ``published:`` entries (as validated at load and stored in the manifest)."""
    entries = config.get("published") or []
    return [published_score(e, "config") for e in entries if isinstance(e, Mapping)]


def all_scores(config: Mapping[str, Any]) -> list[PublishedScore]:
    """The config's numbers first: a user's entry for a model and setting wins over ours."""
    return [*config_scores(config), *shipped_scores()]
