"""``fasteval run --dry-run --estimate``: what a sweep will cost and how long it will take, before it runs.

Per model × suite × setting: requests, prompt and completion tokens, cost at list price and with
the provider's batch discount, and per model the wall time its concurrency and rate limits allow.

- **Prompt tokens** come from the tasks: each task's system prompt, tool definitions, turns and
  images counted by the model's rule (``estimate_prompt``), times the requests a trajectory
  sends, plus what each round adds to every later request (the reply and the tool's result).
- **Rounds, completion tokens, that growth and seconds per job** come from evidence: the run
  index of an earlier run of the same model, suite and setting (``--estimate-from RUN``; a
  pilot's run folder is one). Without evidence they are bounds: every turn uses all its rounds
  and every request all of ``max_tokens``, and each round adds its reply plus one image as big as
  the task's own; such a row is marked an upper bound and has no wall time.

Only jobs resume would still run are counted. Roles (judges, extractors) are not estimated.
"""

from __future__ import annotations

import tempfile
from collections.abc import Container
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig
from fasteval.core.errors import ConfigError
from fasteval.core.pricing import Price, batch_factor, cost_usd, model_prices
from fasteval.core.types import Task
from fasteval.engine.forecast.estimate_prompt import (
    PromptCounter,
    TaskPrompt,
    model_token_rule,
    pairs,
    trajectory_prompt,
)
from fasteval.engine.plan import RunOptions, SuiteRun, check_setting_selectors, load_suite, plan
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index
from fasteval.runfolder.records import RECORDS
from providers import price_terms

DEFAULT_COMPLETION_BOUND = 4096
"""A request's completion bound when neither the model nor the suite sets ``max_tokens``."""
EVIDENCE_BOUNDS = {"rounds": 100_000, "prompt_tokens": 10**12, "completion_tokens": 10**12, "latency_s": 1e7}
"""Past these (or below zero) a job's row is no run's evidence: a tampered or damaged folder (the
index clamps a count of 2**63 to 64 bits and a string to 0; it does not make them true)."""

Key = tuple[str, str, str]


@dataclass(slots=True)
class Evidence:
    """What the jobs of one model × suite × setting used in an earlier run.

    Rounds are counted per user turn (a task's turns are known; a pilot of the first tasks may
    hold no multi-turn one), with their mean square, since the re-sent prompt grows with it.
    A task the earlier run also ran uses its own rounds.
    """

    source: str
    jobs: int
    per_turn: float
    per_turn_sq: float
    growth: float
    """Prompt tokens one round adds to every later request of its trajectory."""
    completion: float
    """Completion tokens per request."""
    seconds: float
    """Seconds of a job per request (the model's time, tools and waits included)."""
    tasks: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Task id -> its own (per_turn, per_turn_sq), for tasks the earlier run ran."""
    refused: int = 0
    """Rows of these jobs left out: values no run produces (negative, past ``EVIDENCE_BOUNDS``)."""

    def rounds(self, task_id: str) -> tuple[float, float]:
        return self.tasks.get(task_id, (self.per_turn, self.per_turn_sq))


@dataclass(slots=True)
class _Plan:
    """One group's planned jobs: each task's fixed prompt and how many jobs (seeds) run it."""

    tasks: dict[str, tuple[TaskPrompt, int]] = field(default_factory=dict)
    max_rounds: int = 10
    max_tokens: int | None = None

    def turns(self, task_id: str) -> int:
        """User turns of a task (1 for one the plan does not hold)."""
        return len(self.tasks[task_id][0].bases) if task_id in self.tasks else 1

    def mean_base(self, task_id: str | None = None) -> float:
        if task_id is not None and task_id in self.tasks:
            bases = self.tasks[task_id][0].bases
            return sum(bases) / len(bases)
        n = sum(c for _, c in self.tasks.values())
        return sum(sum(tp.bases) / len(tp.bases) * c for tp, c in self.tasks.values()) / max(n, 1)


@dataclass(slots=True)
class GroupEstimate:
    model: str
    suite: str
    setting: str
    jobs: int
    requests: float
    prompt_tokens: float
    completion_tokens: float
    basis: str
    """``run DIR (n jobs)`` for evidence, or what the upper bound assumed."""
    upper_bound: bool
    job_seconds: float | None
    """Seconds of all these jobs one after another (evidence only)."""
    cost_usd: float | None = None
    """At list price (None: no known price, e.g. the sim or a local checkpoint)."""
    batch_cost_usd: float | None = None
    """With the provider's batch discount (None: no batch API)."""


@dataclass(slots=True)
class ModelWall:
    model: str
    seconds: float | None
    limited_by: str
    batched: bool
    complete: bool
    """False when some of the model's rows had no evidence of seconds per job (then ``seconds`` is a lower bound)."""


@dataclass(slots=True)
class Estimate:
    groups: list[GroupEstimate]
    walls: dict[str, ModelWall]
    wall_s: float | None
    global_cap: int
    unloaded: int = 0
    """Jobs whose task did not load: error records, no request (``--dry-run`` names them)."""
    refused: dict[str, int] = field(default_factory=dict)
    """Per ``--estimate-from`` folder, rows left out for values no run produces (a tampered folder)."""

    def totals(self) -> dict[str, Any]:
        def total(name: str) -> float | None:
            vals = [getattr(g, name) for g in self.groups]
            known = [v for v in vals if v is not None]
            return sum(known) if known else None

        return {"jobs": sum(g.jobs for g in self.groups), "requests": total("requests"),
                "prompt_tokens": total("prompt_tokens"), "completion_tokens": total("completion_tokens"),
                "cost_usd": total("cost_usd"), "batch_cost_usd": total("batch_cost_usd"),
                "upper_bound": any(g.upper_bound for g in self.groups), "wall_s": self.wall_s,
                "unloaded_jobs": self.unloaded}

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [asdict(g) for g in self.groups], "models": [asdict(w) for w in self.walls.values()],
                "total": self.totals(), "global_cap": self.global_cap, "refused_rows": self.refused}


def plausible(rounds: Any, prompt: Any, completion: Any, latency: Any) -> bool:
    """Could a run have produced this row? Numbers, none negative, none past ``EVIDENCE_BOUNDS``."""
    values = {"rounds": rounds, "prompt_tokens": prompt, "completion_tokens": completion, "latency_s": latency}
    for name, v in values.items():
        v = 0 if v is None else v
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= EVIDENCE_BOUNDS[name]:
            return False
    return True


def read_evidence(run_dirs: list[Path], plans: dict[Key, _Plan],
                  refused: dict[str, int] | None = None) -> dict[Key, Evidence]:
    """Rounds, completion tokens and seconds of earlier runs' jobs of the planned groups, streamed from their indexes.

    The growth per round is fitted so that the tasks' own prompts plus it reproduce the prompt
    tokens those jobs were billed: what a round adds is the one thing the tasks cannot say. A row
    no run could have produced is left out and counted in ``refused`` (per folder); a group left
    with no request to go on has no evidence, so it stays an upper bound, never "0 requests".
    """
    sums: dict[Key, list[float]] = {}
    by_task: dict[tuple[Key, str], list[float]] = {}
    sources: dict[Key, str] = {}
    left_out: dict[Key, int] = {}
    cols = ("model", "suite", "setting", "task_id", "rounds", "prompt_tokens", "completion_tokens", "latency_s")
    for run_dir in run_dirs:
        if not (run_dir / RECORDS).exists():
            raise ConfigError(f"--estimate-from {run_dir}: no {RECORDS} there (not a run folder)")
        with open_index(run_dir) as index:
            for model, suite, setting, task_id, rounds, prompt, completion, latency in index.select(cols, scan=True):
                key = (model, suite, setting)
                planned = plans.get(key)
                if planned is None:
                    continue
                if not plausible(rounds, prompt, completion, latency):
                    left_out[key] = left_out.get(key, 0) + 1
                    if refused is not None:
                        refused[str(run_dir)] = refused.get(str(run_dir), 0) + 1
                    continue
                sources.setdefault(key, str(run_dir))
                r = float(rounds or 0)
                n = r / planned.turns(task_id)
                s = sums.setdefault(key, [0.0] * 8)
                for i, v in enumerate((1, n, n * n, r, completion or 0, latency or 0.0,
                                       (prompt or 0) - r * planned.mean_base(task_id), pairs(r))):
                    s[i] += float(v)
                if task_id in planned.tasks:
                    t = by_task.setdefault((key, task_id), [0.0, 0.0, 0.0])
                    t[0], t[1], t[2] = t[0] + 1, t[1] + n, t[2] + n * n
    out: dict[Key, Evidence] = {}
    for key, (jobs, n1, n2, r, completion, latency, extra, p) in sums.items():
        if not r:  # not one request measured: nothing to estimate requests, tokens or time from
            continue
        out[key] = Evidence(source=sources[key], jobs=int(jobs), per_turn=n1 / jobs, per_turn_sq=n2 / jobs,
                            growth=max(0.0, extra / p) if p else 0.0, completion=completion / r,
                            seconds=latency / r, refused=left_out.get(key, 0))
    for (key, task_id), (c, n1, n2) in by_task.items():
        if key in out:
            out[key].tasks[task_id] = (n1 / c, n2 / c)
    return out


def collect_plan(cfg: SweepConfig, opts: RunOptions) -> tuple[dict[Key, _Plan], int]:
    """Every job resume would still run, grouped, with each task's fixed prompt under its model's rule;
    and how many jobs have a task that did not load (they become error records and send nothing)."""
    finished: Container[str] = frozenset()
    if (opts.run_dir / RECORDS).exists():
        with open_index(opts.run_dir) as index:
            finished = index.done_keys(ok_only=not opts.keep_errors)
    rules = {m.name: model_token_rule(m) for m in cfg.models}
    params = {m.name: dict(m.params or {}) for m in cfg.models}
    plans: dict[Key, _Plan] = {}
    unloaded = 0
    with tempfile.TemporaryDirectory(prefix="fasteval-estimate-") as tmp:
        blobs = BlobStore(Path(tmp))
        runs: list[SuiteRun] = [load_suite(entry, blobs) for entry in cfg.suites]
        check_setting_selectors(runs, opts.selectors)
        counter = PromptCounter(blobs)
        prompts: dict[tuple[int, str, str, str], TaskPrompt] = {}
        for job, run, setting, item in plan(cfg, runs, opts.shard, opts.shard_by, opts.selectors, done=finished):
            if not isinstance(item, Task):
                unloaded += 1  # a row that did not load becomes an error record: no request, no cost
                continue
            key = (job.model, job.suite, job.setting)
            group = plans.get(key)
            if group is None:
                wanted = {**params[job.model], **run.suite.request_params(setting, job.model)}
                group = plans[key] = _Plan(max_rounds=setting.max_rounds, max_tokens=_int_or_none(
                    wanted.get("max_tokens", wanted.get("max_completion_tokens"))))
            rule = rules[job.model]
            pkey = (id(run), setting.name, item.id, rule.name)
            if pkey not in prompts:
                prompts[pkey] = counter.count(run.suite, setting, item, rule)
            tp, n = group.tasks.get(item.id, (prompts[pkey], 0))
            group.tasks[item.id] = (tp, n + 1)
    return plans, unloaded


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _group(key: Key, planned: _Plan, evidence: Evidence | None) -> GroupEstimate:
    jobs = sum(n for _, n in planned.tasks.values())
    if evidence is not None:
        requests = prompt = 0.0
        for task_id, (tp, n) in planned.tasks.items():
            turns = len(tp.bases)
            m1, m2 = evidence.rounds(task_id)
            req = turns * m1
            requests += n * req
            prompt += n * (req * sum(tp.bases) / turns + evidence.growth * (turns * turns * m2 - req) / 2)
        left_out = f"; {evidence.refused} with impossible values left out" if evidence.refused else ""
        return GroupEstimate(*key, jobs=jobs, requests=requests, prompt_tokens=prompt,
                             completion_tokens=requests * evidence.completion,
                             basis=f"run {evidence.source} ({evidence.jobs} jobs{left_out})", upper_bound=False,
                             job_seconds=requests * evidence.seconds)
    bound = planned.max_tokens or DEFAULT_COMPLETION_BOUND
    requests = prompt = 0.0
    for tp, n in planned.tasks.values():
        per_turn = planned.max_rounds if tp.has_tools else 1
        growth = bound + tp.image_tokens if tp.has_tools else bound
        requests += n * per_turn * len(tp.bases)
        prompt += n * trajectory_prompt(tp.bases, per_turn, growth)
    what = f"max_tokens {bound}" if planned.max_tokens else f"no max_tokens: {bound} assumed"
    rounds = (f"{planned.max_rounds} rounds a turn" if any(tp.has_tools for tp, _ in planned.tasks.values())
              else "1 request a turn")
    return GroupEstimate(*key, jobs=jobs, requests=requests, prompt_tokens=prompt,
                         completion_tokens=requests * bound,
                         basis=f"upper bound: {rounds}, {what}", upper_bound=True,
                         job_seconds=None)


def _price(cfg: SweepConfig, g: GroupEstimate, prices: dict[str, Price | None]) -> None:
    price = prices.get(g.model)
    if price is None:
        return
    ep = cfg.endpoint(g.model)
    g.cost_usd = cost_usd({"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens},
                          Price(price.input, price.output, price.cache_read, price.cache_write))
    if ep.kind.batch_factor is not None and ep.serve is None:
        g.batch_cost_usd = g.cost_usd * batch_factor(ep.options, price, cfg.raw.get("prices") or {},
                                                     price_terms(ep.options))


def _wall(cfg: SweepConfig, model: str, groups: list[GroupEstimate], cap: int) -> ModelWall:
    """Seconds the model's jobs need under its concurrency, RPM and TPM limits, whichever binds."""
    ep = cfg.endpoint(model)
    limits = ep.limits
    concurrency = min(int(limits.concurrency or cap), cap)
    known = [g.job_seconds for g in groups if g.job_seconds is not None]
    candidates: dict[str, float] = {}
    if known:
        candidates[f"concurrency {concurrency}"] = sum(known) / concurrency
    if limits.rpm:
        candidates[f"rpm {limits.rpm}"] = 60 * sum(g.requests for g in groups) / float(limits.rpm)
    if limits.tpm:
        tokens = sum(g.prompt_tokens + g.completion_tokens for g in groups)
        candidates[f"tpm {limits.tpm}"] = 60 * tokens / float(limits.tpm)
    if not candidates:
        return ModelWall(model, None, "no evidence of seconds per job", ep.batch is not None, False)
    why = max(candidates, key=lambda k: candidates[k])
    return ModelWall(model, candidates[why], why, ep.batch is not None, len(known) == len(groups))


def estimate(cfg: SweepConfig, opts: RunOptions, evidence_from: list[Path] | None = None) -> Estimate:
    """The estimate of the jobs ``fasteval run`` would run now with these options."""
    plans, unloaded = collect_plan(cfg, opts)
    refused: dict[str, int] = {}
    evidence = read_evidence(list(evidence_from or []), plans, refused)
    prices = model_prices(cfg.raw, price_terms)
    groups = [_group(key, planned, evidence.get(key)) for key, planned in plans.items()]
    for g in groups:
        _price(cfg, g, prices)
    cap = opts.max_concurrency or cfg.run.max_concurrency
    walls = {m: _wall(cfg, m, [g for g in groups if g.model == m], cap) for m in dict.fromkeys(g.model for g in groups)}
    # Models share the global cap: the sweep takes at least the longest model and at least all
    # the job-seconds spread over the cap.
    known = [w.seconds for w in walls.values() if w.seconds is not None]
    seconds = [g.job_seconds for g in groups if g.job_seconds is not None]
    wall = max([*known, sum(seconds) / cap]) if known else None
    return Estimate(groups=groups, walls=walls, wall_s=wall, global_cap=cap, unloaded=unloaded, refused=refused)
