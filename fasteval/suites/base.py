"""What a suite is: a loader of tasks, its named settings, its prompts and its scorer.

The core never names a benchmark: it asks the registry for a suite by name and talks to it
only through this interface. A malformed dataset row is yielded as a LoadError so the rest of
the suite still runs and the error lands on a record.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeGuard

from fasteval.core.errors import BadInput, ConfigError
from fasteval.core.options import OptionSchema
from fasteval.core.registry import LazyRegistry
from fasteval.core.types import Message, Task, ToolCall, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import ToolResult
from fasteval.tools.text_protocols.base import TextProtocol

ToolProtocol = Literal["native", "text"]


@dataclass(slots=True)
class Setting:
    """A named way of running a suite (tools on/off, rounds, fidelity...). Recorded on every record."""

    name: str
    tools: list[str] | None = None
    """Tool names offered; None means the task's own tool list."""
    max_rounds: int = 10
    fidelity: str = "reference"
    tool_protocol: ToolProtocol = "native"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LoadError:
    """A dataset row that could not become a Task; it becomes an error record, not a crash."""

    task_id: str
    message: str


@dataclass(slots=True)
class Score:
    value: float | None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """Set when scoring itself failed (e.g. judge_error): the record gets status error."""

    @property
    def error_kind(self) -> str:
        """The record's error kind for a failed score: ``scorer_error`` when our own rule could not
        judge (a pattern past its time limit, an unreadable gold answer: the task or the rule must
        change), else ``judge_error`` (a judge model or extractor failed: a rescore may succeed).
        One rule, so a live run and a rescore file the same failure under the same kind."""
        return "scorer_error" if (self.error or "").startswith("scorer_error") else "judge_error"


@dataclass(slots=True)
class ScoreContext:
    blobs: BlobStore
    services: dict[str, Any] = field(default_factory=dict)


class Suite(ABC):
    """A benchmark: tasks, settings, prompts and scoring in one place."""

    name: ClassVar[str]
    scorer_version: ClassVar[str] = "1"
    """The loader's, prompts' and scorer's version: part of every job's fingerprint, so a change to
    what the suite sends or how it scores is bumped here and its old results stop being reused."""
    options_schema: ClassVar[OptionSchema | None] = None
    """The suite's ``options`` (checked before a run; None: not declared, not checked)."""
    setting_options: ClassVar[OptionSchema | None] = None
    """Suite-specific keys of a setting's ``options`` (image_profile, tool_options are always allowed)."""
    option_defaults: ClassVar[Mapping[str, Any]] = {}
    """What an option the config leaves out means, for options that change which benchmark runs
    (HR-Bench's ``version``): a published number names them, and the leaderboard matches on them."""

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        self.options = options
        self.blobs = blobs

    @abstractmethod
    def load(self) -> Iterator[Task | LoadError]:
        """Yield tasks in a deterministic order with stable ids."""

    def default_settings(self) -> list[Setting]:
        return [Setting(name="default")]

    def system_prompt(self, task: Task, setting: Setting, tool_specs: list[dict[str, Any]]) -> str | None:
        """System message text; text-protocol suites put the tool signatures here."""
        return None

    def applies_to(self, task: Task, setting: Setting) -> bool:
        """Whether a setting runs on a task (e.g. a diagnostic setting for one task type only)."""
        return True

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        """Roles (``roles:`` in the config) this setting's scoring calls on: without one every job
        would end as a ``judge_error`` after its trajectory was paid for, so the sweep refuses to
        start instead (fasteval.engine.plan.check_roles)."""
        return frozenset()

    def tools(self, task: Task, setting: Setting) -> list[str]:
        return list(task.tools if setting.tools is None else setting.tools)

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        """The message that opens a user turn; suites override for their prompt format."""
        turn = task.turns[turn_index]
        content: list[dict[str, Any]] = [{"type": "image", "image": ref} for ref in turn.images]
        content.append({"type": "text", "text": turn.text})
        return {"role": "user", "content": content}

    def history_before_turn(
        self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory
    ) -> list[Message] | None:
        """Replace the conversation before a later user turn (None keeps the real history).

        VisualToolBench's reference harness, for instance, sends a text-only history with the
        golden answers as earlier replies.
        """
        return None

    def tool_result_messages(
        self, call: ToolCall, result: ToolResult, setting: Setting
    ) -> list[Message] | None:
        """Messages that carry a tool result back (None: the loop's standard format).

        The standard format is a ``tool`` message, with images moved to a following user message
        when the provider cannot take images in tool messages. VistaHop overrides this with a
        user message wrapped in <tool_response>.
        """
        return None

    def text_protocol(self, task: Task, setting: Setting) -> TextProtocol | None:
        """A harness's own text tool protocol for this job (a new one per job), or None.

        When set, the loop sends no ``tools`` list, takes the system prompt from the protocol,
        reads each reply with it, runs its tools and sends results back its way (DeepEyes'
        ``<tool_call>``, Mini-o3's ``<grounding>``).
        """
        return None

    def extract_answer(self, text: str, setting: Setting) -> str:
        """The answer inside a final assistant message (e.g. the last <answer> tag)."""
        return text.strip()

    def answer_on_max_rounds(self, task: Task, turn_index: int, setting: Setting) -> str | None:
        """An answer to record when the round budget runs out (reference quirks), or None."""
        return None

    def text_manifest(self) -> dict[str, Any] | None:
        """Where this suite's texts came from (reference files with sha256, or our wording), for the manifest."""
        return None

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        """Every text the suite sends under ``setting`` (``fasteval suite prompts``); empty if none."""
        return []

    def tool_specs(
        self, task: Task, turn_index: int, setting: Setting, specs: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """The tool entries to send this round (None: the tools' own), e.g. reference wording or
        a description listing the task's file names."""
        return None

    def request_params(self, setting: Setting, model: str) -> dict[str, Any]:
        """Sampling parameters the suite sends under ``setting`` (over the model's own params)."""
        return {}

    def tool_alias(self, name: str, setting: Setting) -> str | None:
        """Our tool name for a name the suite's specs show the model (e.g. ``google_search``)."""
        return None

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The benchmark's own tables (the paper's metrics) from its record dicts; None if none."""
        return None

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """Score predictions written by the benchmark's own reference harness, in its format.

        Returns {"items": {task_id: score}, "overall": x, "by_category": {...}, ...}. Suites
        without a reference output format say so with a ValueError the CLI shows.
        """
        raise ValueError(f"suite {cls.name!r} has no reference output format to score")

    @abstractmethod
    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        """Score a finished trajectory; judge failures come back as Score.error, never as 0."""


# Built-in suites by the module that defines them; a suite's module is imported when it is named.
SUITES: LazyRegistry[type[Suite]] = LazyRegistry("suite", {
    "demo": "fasteval.suites.demo",
    "jsonl": "fasteval.suites.jsonl",
    "tir-synth": "fasteval.suites.tir_synth",
    "tirbench": "fasteval.suites.tirbench",
    "vistahop": "fasteval.suites.vistahop",
    "visualtoolbench": "fasteval.suites.visualtoolbench",
    "vstar": "fasteval.suites.vstar",
    "hrbench": "fasteval.suites.hrbench",
    "mme-realworld": "fasteval.suites.mme_realworld",
    "treebench": "fasteval.suites.treebench",
    "visualprobe": "fasteval.suites.visualprobe",
}, key=lambda cls: cls.name)

def register_suite(cls: type[Suite]) -> type[Suite]:
    """Class decorator: make a suite available by name to configs and the CLI."""
    return SUITES.register(cls)


def has_tables(cls: object) -> TypeGuard[type[Suite]]:
    """Whether a suite prints tables of its own (overrides ``Suite.aggregate``)."""
    return (isinstance(cls, type) and issubclass(cls, Suite)
            and cls.aggregate.__func__ is not Suite.aggregate.__func__)  # type: ignore[attr-defined]


def suites_with_tables(names: Iterable[str]) -> list[str]:
    """Which of these suites print their own tables.

    The sweep writes this into the manifest (``suite_tables``), so that a report of a run whose
    suites have none never imports the suites (their tools, images and config: ~0.15 s).
    """
    return sorted(name for name in set(names) if has_tables(SUITES.get(name)))


def make_suite(name: str, options: dict[str, Any], blobs: BlobStore) -> Suite:
    """The suite ``name`` with its options; an option a suite refuses is a ConfigError (exit 2).

    Suites check their option values in ``__init__`` with a plain ValueError; the config schema
    has checked their shape already, so what is left is the user's value, not our bug.
    """
    try:
        return SUITES[name](options, blobs)
    except ConfigError:
        raise
    except ValueError as e:
        raise ConfigError(f"suite {name}: {e}") from e


def score_output(name: str, files: list[Path], fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
    """``Suite.score_file`` of the suite ``name`` on a reference harness's own output files.

    As with ``make_suite``, suites say that a file is not what their reference writes (or that an
    option does not apply) with a plain ValueError while parsing it; here, at the registry's edge,
    that becomes a BadInput (exit 2), as do an unknown suite and a missing file.
    """
    if name not in SUITES:
        raise BadInput(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES.names()))}")
    for f in files:
        if not f.is_file():
            raise BadInput(f"{f}: no such file")
    cls = SUITES[name]
    try:  # several files pool (VisualToolBench single- and multi-turn); suites that take one say so
        return cls.score_file(files[0] if len(files) == 1 else files, fidelity, options)  # type: ignore[arg-type]
    except ConfigError:
        raise
    except ValueError as e:  # a JSON or table parser's error too (orjson's, UnicodeDecodeError): the file
        raise BadInput(f"suite {name}: {e}") from e
