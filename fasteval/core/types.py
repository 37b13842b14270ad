"""The vocabulary every module speaks: Task, Job, ToolCall, Trajectory, Ending, Record.

Kept in one small file so a reader learns the whole design in one place. Images are never
carried as bytes here: an image is an ``ImageRef``, the sha256 hex of its bytes in the run's
blob store, so records stay small and memory stays flat as concurrency grows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ImageRef = str
"""sha256 hex digest of an image's encoded bytes; the key into a BlobStore."""

Termination = Literal["answered", "max_rounds", "max_tokens", "error", "context_overflow", "refusal", "image_limit"]
JobStatus = Literal["ok", "error"]
ToolStatus = Literal["ok", "error"]

# A message is plain OpenAI chat format, except that image parts are
# {"type": "image", "image": <ImageRef>} and get encoded only when a request is sent.
Message = dict[str, Any]


@dataclass(slots=True)
class Turn:
    """One user turn of a task: its text and the images shown with it."""

    text: str
    images: list[ImageRef] = field(default_factory=list)
    reference: Any = None
    """Reference answer of this turn (multi-turn tasks grade each turn)."""


@dataclass(slots=True)
class Task:
    """One benchmark item, as a suite loaded it."""

    id: str
    turns: list[Turn]
    tools: list[str] = field(default_factory=list)
    reference: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Identity:
    """The fingerprints of what one model × suite × setting computes (fasteval.engine.identity).

    ``model``: the entry's request-shaping fields (or a served checkpoint's fingerprint); ``suite``:
    the suite's name, version, options, data and reference texts; ``setting``: its tools, rounds,
    prompts and the judges its scoring calls. ``group`` hashes the three: the jobs of one group
    differ only by task and seed, so "is this record current" is one test per group.
    """

    model: str = ""
    suite: str = ""
    setting: str = ""
    group: str = ""

    @classmethod
    def of(cls, model: str, suite: str, setting: str) -> Identity:
        return cls(model, suite, setting, group_of(model, suite, setting))

    def components(self) -> dict[str, str]:
        """What a record carries (``components``): the group is derived from them."""
        return {"model": self.model, "suite": self.suite, "setting": self.setting}


NO_IDENTITY = Identity()
"""For a Job built without fingerprints (tests, tools that only name jobs)."""


def group_of(model: str, suite: str, setting: str) -> str:
    """The group fingerprint of three component fingerprints (16 hex)."""
    return hashlib.sha256(f"{model}\x1f{suite}\x1f{setting}".encode()).hexdigest()[:16]


@dataclass(slots=True, frozen=True)
class Job:
    """One unit of work: a task run by a model under a setting with a seed, and what shapes it."""

    model: str
    suite: str
    setting: str
    task_id: str
    seed: int
    identity: Identity = NO_IDENTITY

    @property
    def job_id(self) -> str:
        """The run folder's key of this job: its names and its group fingerprint, stable across
        processes and machines, so resume and shards agree and an edited entry is a new job."""
        return job_id_of(self.model, self.suite, self.setting, self.task_id, self.seed, self.identity.group)

    @property
    def fingerprint(self) -> str:
        """What produced the result, without names: the key of the results store."""
        return fingerprint_of(self.identity.group, self.task_id, self.seed)


def job_id_of(model: str, suite: str, setting: str, task_id: str, seed: int, group: str = "") -> str:
    """``Job(...).job_id`` without building the Job (resume walks every planned job)."""
    key = f"{model}\x1f{suite}\x1f{setting}\x1f{task_id}\x1f{seed}\x1f{group}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def fingerprint_of(group: str, task_id: str, seed: int) -> str:
    """``Job(...).fingerprint`` (32 hex): the group's fingerprint, the task and the seed; no names."""
    return hashlib.sha256(f"{group}\x1f{task_id}\x1f{seed}".encode()).hexdigest()[:32]


JOB_ID_BYTES = 10
"""A job id is the hex of this many bytes of its sha256."""


def job_keys_of(models: Sequence[str], suite: str, setting: str, task_ids: Sequence[str],
                seeds: Sequence[int], groups: Sequence[str] | None = None) -> bytes:
    """The ids (``job_id_of``, each model's with its ``groups`` fingerprint) of every (task, seed,
    model), in that nesting order, as their raw bytes end to end (``JOB_ID_BYTES`` each): a plan's
    block at once, for a look-up that never needs their hex."""
    sha = hashlib.sha256
    pairs = [(f"{m}\x1f{suite}\x1f{setting}\x1f", f"\x1f{g}")
             for m, g in zip(models, groups if groups is not None else [""] * len(models), strict=True)]
    tails = [f"\x1f{s}" for s in seeds]
    return b"".join([sha(f"{p}{t}{tail}{g}".encode()).digest()[:JOB_ID_BYTES]
                     for t in task_ids for tail in tails for p, g in pairs])


@dataclass(slots=True)
class ToolCall:
    """One executed (or rejected) tool call, logged for tool-use metrics after the run."""

    id: str
    name: str
    args: Any
    status: ToolStatus
    output: str = ""
    error: str | None = None
    latency_s: float = 0.0
    images: list[ImageRef] = field(default_factory=list)
    turn: int = 0
    round: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """Facts for metrics that the model did not see (search provider, query, ranks...)."""


@dataclass(slots=True)
class Usage:
    """Tokens of one or more requests. ``prompt_tokens`` counts the whole prompt, cached or not;
    ``cache_read_tokens`` and ``cache_write_tokens`` say how much of it a prompt cache served or
    stored, because providers price those differently (fasteval.core.pricing)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """How many of ``completion_tokens`` were reasoning (already counted there: billed once)."""
    image_tokens: int = 0
    """How many of ``prompt_tokens`` stood for images (vLLM's ``prompt_tokens_details.multimodal_tokens``)."""

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.image_tokens += other.image_tokens


@dataclass(slots=True, frozen=True)
class Ending:
    """How a user turn, or the whole job, stopped: the termination, why, and the turn's answer."""

    termination: Termination
    reason: str | None = None
    answer: str | None = None
    final: bool = False
    """No later user turn is played (the image limit, a context overflow, a refusal, an error)."""


@dataclass(slots=True)
class Trajectory:
    """Everything that happened in one job: the conversation, the tools, the ending."""

    messages: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage_by_turn: list[Usage] = field(default_factory=list)
    prompt_tokens_by_round: list[int] = field(default_factory=list)
    """Each request's prompt tokens, in order: what a round (its images, its history) cost, not only a turn's sum."""
    completion_tokens_by_round: list[int] = field(default_factory=list)
    """Each request's completion tokens, in the same order (per-step metrics of an ATIF export)."""
    turn_by_round: list[int] = field(default_factory=list)
    """The user turn each request belongs to, in the same order: a round's place in a multi-turn job."""
    answers: list[str | None] = field(default_factory=list)
    """Final answer text of each user turn (None when the turn ended without one)."""
    rounds: int = 0
    termination: Termination = "answered"
    termination_reason: str | None = None
    seed: int = 0
    """The job's seed, so a suite can lay a task out per seed (e.g. option order) and score it back."""

    def end(self, ending: Ending) -> None:
        """The one place a trajectory's ending is written: the agent's endings of each turn and the
        job's errors alike. A turn that ends keeps its answer (None when it has none); an error
        leaves the turn it cut short without one."""
        self.termination, self.termination_reason = ending.termination, ending.reason
        if ending.termination != "error":
            self.answers.append(ending.answer)


@dataclass(slots=True)
class Record:
    """One finished job: exactly one JSONL line in the run folder."""

    job_id: str
    model: str
    suite: str
    setting: str
    task_id: str
    seed: int
    status: JobStatus
    score: float | None
    answer: str | None
    fingerprint: str = ""
    """What produced the result (``Job.fingerprint``): the results store's key; "" before fingerprints."""
    components: dict[str, str] = field(default_factory=dict)
    """The model, suite and setting fingerprints (``Identity.components``): whether a record is
    current or superseded is decided from them and the manifest, with no config at hand."""
    reused: dict[str, Any] | None = None
    """Set on a record copied from the results store instead of run: the run that computed it,
    when, and the store (docs/run-folder.md, reuse)."""
    error: str | None = None
    error_kind: str | None = None
    termination: Termination | None = None
    rounds: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    retries: int = 0
    score_details: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    trajectory: Trajectory | dict[str, Any] | None = None
    """The Trajectory when written by a sweep; a plain dict when read back or rescored."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
