"""What a scorer of one's own tasks is: a named rule that grades one reply against one reference.

The ``jsonl`` suite names a scorer per task (a row's ``scorer``) or per suite entry (the option
``scorer``). A scorer reads the model's reply as untrusted text: a reply it cannot read is a wrong
answer (0), never an exception. Only a failure of the scoring itself (a judge that never answers
readably, a task's pattern that runs past its time) is an error, which the record carries instead
of a score, so a broken scorer is never counted as a wrong model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema


@dataclass(frozen=True, slots=True)
class Check:
    """One graded turn: the model's final reply and what the task says about it."""

    reply: str | None
    reference: Any
    """The task's answer: a string or a number (``any_of``: a list of them)."""
    question: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    """Letter -> option text, for ``choice`` (and shown to a judge)."""


@dataclass(slots=True)
class Verdict:
    """A scorer's result: a value in [0, 1], or an error saying why there is none."""

    value: float | None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreEnv:
    """What a scorer may call on while grading: the run's services (judge roles among them)."""

    services: Mapping[str, Any] = field(default_factory=dict)
    judge_role: str = "judge"
    """The role a ``judge`` scorer asks when its spec names none (the suite's ``judge`` option)."""


class Scorer(ABC):
    """A named grading rule with declared options; built once per distinct spec and shared."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""
    options: ClassVar[OptionSchema] = {}

    def __init__(self, opts: Mapping[str, Any]) -> None:
        self.opts = dict(opts)

    def check_task(self, reference: Any, options: Mapping[str, str]) -> None:
        """Raise ValueError when a task's answer (or options) cannot be scored by this rule.

        Called while loading, so a bad row is that row's load error, not a failure per job.
        """
        if not is_scalar(reference):
            raise ValueError(f"'answer' must be a string or a number for scorer {self.name!r}, "
                             f"got {type(reference).__name__}")

    def roles(self, default_role: str) -> frozenset[str]:
        """Config roles this scorer calls on (a judge); checked before a sweep starts."""
        return frozenset()

    @abstractmethod
    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        """The verdict on one reply (None reply: never asked; callers score it 0 themselves)."""


def is_scalar(value: Any) -> bool:
    """A reference a rule can compare: a string or a number (not a bool, null, list or object)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def check_options(scorer: str, schema: OptionSchema, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against a scorer's declared options; ValueError naming the first problem."""
    out: dict[str, Any] = {}
    for key, value in given.items():
        opt = schema.get(key)
        if opt is None:
            known = ", ".join(sorted(schema)) or "none"
            raise ValueError(f"scorer {scorer!r} has no option {key!r} (known: {known})")
        out[key] = _typed(scorer, key, opt, value)
    return out


def _typed(scorer: str, key: str, opt: Opt, value: Any) -> Any:
    where = f"scorer {scorer!r}: option {key!r}"
    if opt.choices is not None and value not in opt.choices:
        raise ValueError(f"{where} must be one of {', '.join(map(str, opt.choices))}, got {value!r:.80}")
    if opt.type == "bool" and not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {value!r:.80}")
    if opt.type == "int" and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{where} must be a whole number >= 0, got {value!r:.80}")
    if opt.type == "float":
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{where} must be a number >= 0, got {value!r:.80}")
        return float(value)
    if opt.type == "str" and not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r:.80}")
    return value
