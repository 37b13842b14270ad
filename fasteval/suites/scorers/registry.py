"""Scorers by name, specs as a config or a row writes them, and ``any_of``.

A spec is a name (``numeric``) or an object with a name and options
(``{"name": "numeric", "rel_tol": 0.01}``; in a CSV cell, that object as JSON text). Each distinct
spec is built once per suite and shared by its tasks. A scorer's module is imported when a spec
names it, so a run of exact-match tasks never loads sympy or the regex engine.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from fasteval.core.options import Opt, OptionSchema
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict, check_options, is_scalar

SCORER_CLASSES: dict[str, str] = {
    "exact": "fasteval.suites.scorers.text:Exact",
    "contains": "fasteval.suites.scorers.text:Contains",
    "numeric": "fasteval.suites.scorers.numeric:Numeric",
    "regex": "fasteval.suites.scorers.pattern:Regex",
    "choice": "fasteval.suites.scorers.choice:Choice",
    "math": "fasteval.suites.scorers.mathexpr:Math",
    "judge": "fasteval.suites.scorers.judged:Judge",
    "any_of": "fasteval.suites.scorers.registry:AnyOf",
}
SCORER_NAMES: tuple[str, ...] = tuple(SCORER_CLASSES)


def scorer_class(name: str) -> type[Scorer]:
    """The class of a scorer name; ValueError naming the known ones."""
    target = SCORER_CLASSES.get(name)
    if target is None:
        raise ValueError(f"unknown scorer {name[:40]!r}; known: {', '.join(SCORER_NAMES)}")
    module, _, cls = target.partition(":")
    found: type[Scorer] = getattr(importlib.import_module(module), cls)
    return found


@dataclass(frozen=True, slots=True)
class ScorerSpec:
    """A scorer's name and its checked options, hashable (the key scorers are shared by)."""

    name: str
    options_json: bytes = b"{}"

    @property
    def options(self) -> dict[str, Any]:
        """The options as a new dict (parsed once per distinct spec: tasks share a few specs)."""
        return dict(_parsed(self.options_json))

    @property
    def label(self) -> str:
        """What a record names: ``numeric``, or ``any_of(numeric)``."""
        if self.name == "any_of":
            inner = self.options.get("of", "exact")
            return f"any_of({inner if isinstance(inner, str) else inner.get('name', '?')})"
        return self.name


@functools.lru_cache(maxsize=1024)
def _parsed(options_json: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(options_json)
    return loaded


def parse_spec(value: Any) -> ScorerSpec:
    """A spec from a config value or a row's field: a name, an object, or an object as JSON text.

    ValueError names what is wrong (an unknown scorer or option, a value of the wrong type).
    """
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError as e:
                raise ValueError(f"scorer {text[:60]!r} is not valid JSON ({e})") from None
        else:
            value = {"name": text}
    if not isinstance(value, dict):
        raise ValueError(f"a scorer is a name or an object with 'name', got {type(value).__name__}")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a scorer object needs 'name' (one of " + ", ".join(SCORER_NAMES) + ")")
    cls = scorer_class(name)
    opts = check_options(name, cls.options, {k: v for k, v in value.items() if k != "name"})
    if name == "any_of":
        inner = parse_spec(opts.get("of", "exact"))
        if inner.name in ("any_of", "judge"):
            raise ValueError(f"any_of cannot hold {inner.name!r} (a judge takes a list of answers itself)")
        opts["of"] = {"name": inner.name, **inner.options}
    return ScorerSpec(name, orjson.dumps(opts, option=orjson.OPT_SORT_KEYS))


class Scorers:
    """The scorers of one suite, built once per spec."""

    def __init__(self) -> None:
        self._built: dict[ScorerSpec, Scorer] = {}

    def get(self, spec: ScorerSpec) -> Scorer:
        scorer = self._built.get(spec)
        if scorer is None:
            scorer = self._built[spec] = scorer_class(spec.name)(spec.options)
        return scorer

    def roles(self, default_role: str) -> frozenset[str]:
        """Every role a built scorer calls on."""
        out: frozenset[str] = frozenset()
        for scorer in self._built.values():
            out |= scorer.roles(default_role)
        return out


class AnyOf(Scorer):
    """Right when the answer matches any of the task's answers under the scorer ``of``."""

    name = "any_of"
    doc = "the task's answer is a list; the answer may match any of them (under the scorer 'of', default exact)"
    options: ClassVar[OptionSchema] = {"of": Opt("any", "the scorer each answer is tried with (default exact)")}

    def __init__(self, opts: Mapping[str, Any]) -> None:
        super().__init__(opts)
        inner = dict(opts.get("of") or {"name": "exact"})
        name = str(inner.pop("name"))
        self.inner = scorer_class(name)(inner)

    def check_task(self, reference: Any, options: Mapping[str, str]) -> None:
        refs = reference if isinstance(reference, list) else [reference]
        if not refs:
            raise ValueError("'answer' is an empty list (any_of needs at least one answer)")
        for i, ref in enumerate(refs):
            try:
                self.inner.check_task(ref, options)
            except ValueError as e:
                raise ValueError(f"answer {i}: {e}") from None

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        refs = check.reference if isinstance(check.reference, list) else [check.reference]
        tried: list[dict[str, Any]] = []
        errors: list[str] = []
        for i, ref in enumerate(refs):
            verdict = await self.inner.grade(Check(check.reply, ref, check.question, check.options), env)
            if verdict.error is not None:
                errors.append(verdict.error)
                continue
            tried.append({"answer_index": i, **verdict.details})
            if verdict.value == 1.0:
                return Verdict(1.0, {"matched": i, **verdict.details})
        if errors and not tried:
            return Verdict(None, {"tried": len(refs)}, error=errors[0])
        return Verdict(0.0, {"matched": None, "tried": len(refs), **(tried[-1] if tried else {}),
                             **({"errors": errors} if errors else {})})


def reference_ok(value: Any) -> bool:
    """A task answer any scorer might take: a scalar or a non-empty list of scalars."""
    if isinstance(value, list):
        return bool(value) and all(is_scalar(v) for v in value)
    return is_scalar(value)
