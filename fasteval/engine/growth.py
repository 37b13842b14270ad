"""A run folder that grows: what an edited config keeps, adds and reruns (docs/run-folder.md).

The manifest's ``identity`` holds the current group fingerprint of each model × suite × setting of
the config (what makes a record current, read by the run index with no config at hand) and every
group and component fingerprint this folder has seen, with the fields they hash. So a rerun with
an edited config needs no flag: a job whose id (names + group fingerprint) has an ok record is
done, every other job runs, and a group that changed can say which field did. A change no
fingerprint sees (concurrency, limits, an endpoint's URL) changes no group and reruns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fasteval.config.load import SweepConfig
from fasteval.engine.identity import Fingerprints
from fasteval.engine.plan import SuiteRun

GroupKey = tuple[str, str, str]
"""(model, suite, setting) by name."""

_KINDS = ("model", "suite", "setting")


def identity_section(old: Mapping[str, Any] | None, cfg: SweepConfig, runs: list[SuiteRun], ids: Fingerprints,
                     now: str) -> dict[str, Any]:
    """The manifest's ``identity``: this config's current groups, over every group seen before."""
    prior = dict(old or {})
    groups: dict[str, Any] = {k: dict(v) for k, v in (prior.get("groups") or {}).items() if isinstance(v, Mapping)}
    components: dict[str, dict[str, Any]] = {k: dict((prior.get("components") or {}).get(k) or {}) for k in _KINDS}
    current: list[list[str]] = []
    for run in runs:
        for setting in run.settings:
            for m in cfg.models:
                ident = ids.identity(m.name, run, setting)
                current.append([m.name, run.suite.name, setting.name, ident.group])
                entry = groups.setdefault(ident.group, {"model": ident.model, "suite": ident.suite,
                                                        "setting": ident.setting, "names": [], "first_seen": now})
                names = [m.name, run.suite.name, setting.name]
                if names not in entry["names"]:
                    entry["names"] = [*entry["names"], names]
                entry["last_seen"] = now
                components["model"][ident.model] = ids.models[m.name][1]
                components["suite"][ident.suite] = ids.suites[id(run)][1]
                components["setting"][ident.setting] = ids.settings[id(run), setting.name][1]
    return {"current": current, "groups": groups, "components": components}


@dataclass(slots=True)
class GroupChange:
    """What a model × suite × setting of the new config is to this folder."""

    state: Literal["same", "new", "changed"]
    fields: list[str] = field(default_factory=list)
    """For ``changed``: what changed, e.g. ``model params.temperature: 0.7 -> 1.0``."""
    note: str | None = None
    """For ``new``: why nothing here matches it when something nearly does (a rename)."""


def classify(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[GroupKey, GroupChange]:
    """Each current group of ``new`` (an identity section) against what ``old`` saw."""
    prior = old or {}
    groups: Mapping[str, Any] = prior.get("groups") or {}
    before: dict[GroupKey, list[str]] = {}
    for m, s, st, g in prior.get("current") or []:
        before.setdefault((m, s, st), []).append(g)
    seen: dict[GroupKey, list[tuple[str, str]]] = {}  # names -> [(last_seen, group)]
    for g, entry in groups.items():
        for names in entry.get("names") or []:
            if isinstance(names, list) and len(names) == 3:
                seen.setdefault((str(names[0]), str(names[1]), str(names[2])), []).append(
                    (str(entry.get("last_seen", "")), g))
    out: dict[GroupKey, GroupChange] = {}
    for m, s, st, g in new.get("current") or []:
        key = (m, s, st)
        if g in before.get(key, []) or any(g == h for _, h in seen.get(key, [])):
            out[key] = GroupChange("same")
            continue
        earlier = before.get(key) or [h for _, h in sorted(seen.get(key, []), reverse=True)]
        was = earlier[0] if earlier else None
        if was is not None and was in groups:
            out[key] = GroupChange("changed", _component_changes(prior, new, groups[was], new["groups"][g]))
        else:
            out[key] = GroupChange("new", note=_near_match(prior, new, g))
    return out


def _component_changes(old: Mapping[str, Any], new: Mapping[str, Any], was: Mapping[str, Any],
                       now: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for kind in _KINDS:
        if was.get(kind) == now.get(kind):
            continue
        a = (old.get("components") or {}).get(kind, {}).get(was.get(kind))
        b = (new.get("components") or {}).get(kind, {}).get(now.get(kind))
        diffs = field_changes(a, b) if isinstance(a, Mapping) and isinstance(b, Mapping) else []
        out.extend(f"{kind} {d}" for d in diffs) if diffs else out.append(f"{kind} (fingerprint)")
    return out


def field_changes(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key.path: old -> new`` for every leaf that differs (values shortened to 60 characters)."""
    out: list[str] = []
    for key in sorted(set(a) | set(b), key=str):
        x, y = a.get(key, _ABSENT), b.get(key, _ABSENT)
        where = f"{prefix}{key}"
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out.extend(field_changes(x, y, where + "."))
        elif x != y:
            out.append(f"{where}: {_short(x)} -> {_short(y)}")
    return out


class _Absent:
    def __repr__(self) -> str:
        return "(unset)"


_ABSENT = _Absent()


def _short(v: Any) -> str:
    text = repr(v) if isinstance(v, _Absent) else str(v)
    return text if len(text) <= 60 else text[:59] + "…"


def _near_match(old: Mapping[str, Any], new: Mapping[str, Any], g: str) -> str | None:
    """A new group that only differs from one seen before by a name: said, never guessed."""
    groups: Mapping[str, Any] = old.get("groups") or {}
    if g in groups:
        names = ", ".join("/".join(n) for n in groups[g].get("names") or [])
        return (f"the same fingerprint as the records of {names} (names differ, so they are not counted as "
                "these; a results store reuses them)")
    now = new["groups"][g]
    suite_now = (new.get("components") or {}).get("suite", {}).get(now["suite"]) or {}
    for entry in groups.values():
        if entry.get("model") != now["model"] or entry.get("setting") != now["setting"]:
            continue
        suite_was = (old.get("components") or {}).get("suite", {}).get(entry.get("suite")) or {}
        if suite_was and {k: v for k, v in suite_was.items() if k != "suite"} == \
                {k: v for k, v in suite_now.items() if k != "suite"}:
            names = ", ".join("/".join(n) for n in entry.get("names") or [])
            return (f"the same data and options as {names}, under another suite name: a suite's name is part "
                    "of its identity (its scorer), so those records are not reused")
    return None


def describe(key: GroupKey, change: GroupChange) -> str:
    """One line for run.log and the dry run."""
    names = "/".join(key)
    if change.state == "changed":
        return f"{names} changed ({'; '.join(change.fields)}): its jobs run again, its old records are kept aside"
    if change.state == "new":
        return f"{names} is new" + (f": {change.note}" if change.note else "")
    return f"{names} is unchanged"
