"""The plan of a sweep: which jobs a config, its suites and the selectors make, in which order.

Read by the sweep to launch, and by dry-run, estimate, rescore and status to count or preview
without running anything; so it imports nothing of the scheduler, clients or serving.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig
from fasteval.core.errors import ConfigError
from fasteval.core.types import JOB_ID_BYTES, Identity, Job, Task, job_keys_of
from fasteval.engine.identity import Fingerprints, data_hash, fingerprints
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Setting, Suite, make_suite


@dataclass(slots=True)
class Selectors:
    """Narrow the plan without changing the config (resume and the config hash ignore them)."""

    models: list[str] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    limit: int | None = None
    """First N tasks of each suite."""
    spread: bool = False
    """``limit`` takes N tasks spread evenly over each suite, not the first N (a pilot: suites are
    often ordered by task type)."""

    def __bool__(self) -> bool:
        return bool(self.models or self.suites or self.settings or self.seeds or self.limit is not None)


@dataclass(slots=True)
class RunOptions:
    run_dir: Path
    shard: tuple[int, int] | None = None
    shard_by: str = "job"
    """``job``: jobs spread by hash of job_id; ``model``: whole models per shard (a checkpoint per node)."""
    max_concurrency: int | None = None
    keep_errors: bool = False
    progress: bool | None = None
    selectors: Selectors = field(default_factory=Selectors)
    no_wait: bool = False
    """Batched models: submit their batches and stop (exit 3); a rerun collects the results."""


@dataclass(slots=True)
class SuiteRun:
    suite: Suite
    settings: list[Setting]
    items: list[Task | LoadError]
    data_hash: str = ""
    """The content of ``items`` (fasteval.engine.identity.data_hash): part of the suite's fingerprint."""


def default_run_dir(config_path: str | Path, shard: tuple[int, int] | None = None) -> Path:
    """``runs/<config stem>`` (``-shard<i>of<n>`` for a shard): where a run goes without --run-dir."""
    folder = Path("runs") / Path(config_path).stem
    return folder.with_name(f"{folder.name}-shard{shard[0]}of{shard[1]}") if shard else folder


def parse_shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    try:
        idx, count = int(i), int(n)
    except ValueError:
        idx, count = -1, 0
    if not 0 <= idx < count:
        raise ConfigError(f"--shard {text}: expected i/n with 0 <= i < n")
    return idx, count


def in_shard(job_id: str, shard: tuple[int, int] | None, model_slot: int | None = None) -> bool:
    """Is this job in the shard? By job_id hash, or by the model's position when sharding by model."""
    if shard is None:
        return True
    key = int(job_id, 16) if model_slot is None else model_slot
    return key % shard[1] == shard[0]


def build_settings(suite: Suite, entries: list[dict[str, Any]] | None) -> list[Setting]:
    """Settings from the config, each filled in from the suite's default of the same name."""
    defaults = {s.name: s for s in suite.default_settings()}
    if not entries:
        return list(defaults.values())
    out = []
    for e in entries:
        if "extends" in e and e["extends"] not in defaults:
            raise ConfigError(f"suite {suite.name}: setting {e['name']!r} extends {e['extends']!r}, which is not one "
                             f"of its default settings ({', '.join(defaults) or 'none'})")
        base = defaults.get(e.get("extends", e["name"]))
        merged: dict[str, Any] = asdict(base) if base else {"name": e["name"]}
        options = {**merged.get("options", {}), **(e.get("options") or {})}
        merged.update({k: v for k, v in e.items() if k not in ("options", "extends")})
        merged["options"] = options
        out.append(Setting(**merged))
    return out


def load_suite(entry: dict[str, Any], blobs: BlobStore) -> SuiteRun:
    suite = make_suite(entry["name"], dict(entry.get("options") or {}), blobs)
    items: list[Task | LoadError] = []
    seen: set[str] = set()
    try:
        for item in suite.load():
            if isinstance(item, Task) and item.id in seen:
                item = LoadError(task_id=f"{item.id}#dup{len(items)}", message=f"duplicate task id {item.id!r}")
            seen.add(item.task_id if isinstance(item, LoadError) else item.id)
            items.append(item)
    except Exception as e:  # a loader that dies still leaves what it loaded and one error record
        items.append(LoadError(task_id=f"{entry['name']}-load", message=f"loader failed: {type(e).__name__}: {e}"))
    return SuiteRun(suite=suite, settings=build_settings(suite, entry.get("settings")), items=items,
                    data_hash=data_hash(items))


def plan(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str = "job",
         selectors: Selectors | None = None, done: Container[str] = frozenset(),
         on_done: Callable[[int], None] | None = None,
         ids: Fingerprints | None = None) -> Iterator[tuple[Job, SuiteRun, Setting, Task | LoadError]]:
    """Every job of the sweep in a deterministic order (models interleaved so endpoints share work).

    Selectors only drop jobs: a job keeps its id, so a narrowed run and a full one resume each other.
    A job's id holds its group's fingerprint (``ids``, computed here when not given): jobs whose id
    is in ``done`` (the resume set: a ``DoneKeys`` array, or any container of ids; the fingerprint
    has an ok record under these names) are left out and counted to ``on_done`` a block at a time:
    resuming a finished sweep builds no Job. The plan is made lazily, a block of a few thousand
    jobs at a time, so its first jobs come at once and it never holds more than a block.
    """
    sel = selectors or Selectors()
    models, seeds = _plan_axes(cfg, sel)
    ids = ids if ids is not None else fingerprints(cfg, runs)
    if shard is None and not done:  # unsharded with nothing done: no hash
        for run, setting, item, tid in _plan_items(runs, sel):
            groups = [ids.identity(model, run, setting) for model in models]  # cached per group
            for seed in seeds:
                for model, identity in zip(models, groups, strict=True):
                    yield Job(model=model, suite=run.suite.name, setting=setting.name, task_id=tid, seed=seed,
                              identity=identity), run, setting, item
        return
    n_models = len(models)
    for run, setting, block, keep, n_done, groups in _keyed_blocks(cfg, runs, shard, shard_by, sel, done, ids):
        if n_done and on_done is not None:
            on_done(n_done)
        for i in keep:
            item, tid = block[i // (n_models * len(seeds))]
            rest = i % (n_models * len(seeds))
            yield Job(model=models[rest % n_models], suite=run.suite.name, setting=setting.name, task_id=tid,
                      seed=seeds[rest // n_models], identity=groups[rest % n_models]), run, setting, item


_BLOCK_JOBS = 4096
"""Jobs keyed at once: one vectorised look-up each, a few milliseconds of the event loop."""

Block = list[tuple[Task | LoadError, str]]


def _keyed_blocks(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str,
                  sel: Selectors, done: Container[str], ids: Fingerprints
                  ) -> Iterator[tuple[SuiteRun, Setting, Block, list[int], int, list[Identity]]]:
    """The plan in blocks: each block's (item, task id) pairs, the positions of its jobs left to run
    (item by item, then seed, then model: the plan's order), how many of its jobs are done, and the
    models' identities in its suite × setting."""
    models, seeds = _plan_axes(cfg, sel)
    per_item = len(models) * len(seeds)
    if not per_item:
        return
    slot = {m.name: i for i, m in enumerate(cfg.models)} if shard_by == "model" else {}
    contains_keys = getattr(done, "contains_keys", None)
    any_done = bool(done)
    width = JOB_ID_BYTES
    for run, setting, block in _item_blocks(runs, sel, max(1, _BLOCK_JOBS // per_item)):
        groups = [ids.identity(model, run, setting) for model in models]
        keys = job_keys_of(models, run.suite.name, setting.name, [tid for _, tid in block], seeds,
                           [g.group for g in groups])
        n = len(keys) // width
        positions = list(range(n)) if shard is None else \
            [i for i in range(n) if in_shard(keys[i * width:(i + 1) * width].hex(), shard,
                                             slot.get(models[i % len(models)]))]
        if not any_done:
            keep = positions
        elif contains_keys is not None:  # the run index's resume array: the whole block at once
            import numpy as np

            left = np.flatnonzero(~contains_keys(keys, width))
            keep = left.tolist() if shard is None else sorted(set(left.tolist()).intersection(positions))
        else:
            keep = [i for i in positions if keys[i * width:(i + 1) * width].hex() not in done]
        yield run, setting, block, keep, len(positions) - len(keep), groups


def _item_blocks(runs: list[SuiteRun], sel: Selectors, size: int) -> Iterator[tuple[SuiteRun, Setting, Block]]:
    """The plan's items, ``size`` at a time, each block within one suite × setting."""
    block: Block = []
    current: tuple[SuiteRun, Setting] | None = None
    for run, setting, item, tid in _plan_items(runs, sel):
        if current is not None and (current[0] is not run or current[1] is not setting or len(block) >= size):
            yield current[0], current[1], block
            block = []
        current = (run, setting)
        block.append((item, tid))
    if current is not None and block:
        yield current[0], current[1], block


def plan_left(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str = "job",
              selectors: Selectors | None = None, done: Container[str] = frozenset(),
              ids: Fingerprints | None = None) -> Counter[tuple[str, str, str, int]]:
    """Jobs of the plan not in ``done`` per (model, suite, setting, seed), keyed in blocks like ``plan``
    but without building a Job: what a served model has left to run, what a dry run would run."""
    sel = selectors or Selectors()
    if shard is None and not done:
        return _plan_combos(cfg, runs, sel)
    models, seeds = _plan_axes(cfg, sel)
    left: Counter[tuple[str, str, str, int]] = Counter()
    per_item = len(models) * len(seeds)
    ids = ids if ids is not None else fingerprints(cfg, runs)
    for run, setting, _, keep, _, _ in _keyed_blocks(cfg, runs, shard, shard_by, sel, done, ids):
        for rest, n in Counter(i % per_item for i in keep).items():
            left[(models[rest % len(models)], run.suite.name, setting.name, seeds[rest // len(models)])] += n
    return left


def _plan_axes(cfg: SweepConfig, sel: Selectors) -> tuple[list[str], list[int]]:
    """The plan's models and seeds, as the selectors narrow them."""
    models = [m.name for m in cfg.models if not sel.models or m.name in sel.models]
    return models, [s for s in cfg.seeds if not sel.seeds or s in sel.seeds]


def _plan_items(runs: list[SuiteRun], sel: Selectors) -> Iterator[tuple[SuiteRun, Setting, Task | LoadError, str]]:
    """Each (suite, setting, task) of the plan with its task id; every model and seed runs each."""
    for run in runs:
        if sel.suites and run.suite.name not in sel.suites:
            continue
        items = run.items if sel.limit is None else spread(run.items, sel.limit) if sel.spread else run.items[:sel.limit]
        for setting in run.settings:
            if sel.settings and setting.name not in sel.settings:
                continue
            for item in items:
                if isinstance(item, Task) and not run.suite.applies_to(item, setting):
                    continue
                yield run, setting, item, item.task_id if isinstance(item, LoadError) else item.id


def spread(items: list[Any], n: int) -> list[Any]:
    """``n`` items at even steps through ``items``, in order (all of them when there are no more)."""
    if n >= len(items):
        return items
    return [items[i * len(items) // n] for i in range(n)]


def plan_totals(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str = "job",
                selectors: Selectors | None = None,
                ids: Fingerprints | None = None) -> tuple[int, dict[str, dict[str, int]]]:
    """The plan's size, and per model, suite, setting and seed (the manifest's ``plan``)."""
    combos = plan_combos(cfg, runs, shard, shard_by, selectors, ids)
    by: dict[str, dict[str, int]] = {"model": {}, "suite": {}, "setting": {}, "seed": {}}
    for (model, suite, setting, seed), n in combos.items():
        # a setting is its suite's: two suites' "tool" settings are two rows of status, not one
        for dim, val in zip(("model", "suite", "setting", "seed"), (model, suite, f"{suite}/{setting}", seed),
                            strict=True):
            by[dim][str(val)] = by[dim].get(str(val), 0) + n
    return sum(combos.values()), by


def plan_combos(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str = "job",
                selectors: Selectors | None = None,
                ids: Fingerprints | None = None) -> Counter[tuple[str, str, str, int]]:
    """Jobs of the plan per (model, suite, setting, seed): unsharded, counted from the tasks (no job
    built, no id hashed); a shard's, keyed in blocks without building a job (``plan_left``)."""
    sel = selectors or Selectors()
    return _plan_combos(cfg, runs, sel) if shard is None else plan_left(cfg, runs, shard, shard_by, sel, ids=ids)


def _plan_combos(cfg: SweepConfig, runs: list[SuiteRun], sel: Selectors) -> Counter[tuple[str, str, str, int]]:
    """Jobs per (model, suite, setting, seed) of an unsharded plan. Every model and seed runs every
    planned task, so counting tasks is enough: no job is built, no id hashed."""
    combos: Counter[tuple[str, str, str, int]] = Counter()
    models, seeds = _plan_axes(cfg, sel)
    per = Counter((run.suite.name, setting.name) for run, setting, _, _ in _plan_items(runs, sel))
    for (suite, setting), n in per.items():
        for seed in seeds:
            for model in models:
                combos[(model, suite, setting, seed)] += n
    return combos


def check_setting_selectors(runs: list[SuiteRun], selectors: Selectors) -> None:
    """``--setting`` must name a setting of some selected suite (a typo would silently run nothing)."""
    known = {s.name for r in runs if not selectors.suites or r.suite.name in selectors.suites for s in r.settings}
    unknown = [s for s in selectors.settings if s not in known]
    if unknown:
        raise ConfigError(f"--setting {', '.join(unknown)}: no such setting (known: {', '.join(sorted(known))})")


def check_roles(cfg: SweepConfig, runs: list[SuiteRun], selectors: Selectors) -> None:
    """Every role a selected setting's scoring calls on is configured: otherwise each of its jobs
    would pay for a trajectory and then end as a ``judge_error``; refused before anything runs."""
    missing: list[str] = []
    roles: set[str] = set()
    for run in runs:
        if selectors.suites and run.suite.name not in selectors.suites:
            continue
        for s in run.settings:
            if selectors.settings and s.name not in selectors.settings:
                continue
            for role in sorted(run.suite.roles_needed(s) - set(cfg.roles)):
                missing.append(f"suite {run.suite.name} (setting {s.name}) scores with the role {role!r}")
                roles.add(role)
    if missing:
        example = ", ".join(f"{r}: {{provider: ..., model: ...}}" for r in sorted(roles))
        raise ConfigError(f"{'; '.join(dict.fromkeys(missing))}, which {cfg.path.name} does not configure: add "
                         f"roles: {{{example}}} (docs/config.md, roles); nothing ran")
