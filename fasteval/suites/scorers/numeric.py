"""``numeric``: a number read from the answer, equal to the reference within a tolerance.

Numbers are read the way people write them: ``1,000`` is 1000 (and so is ``1 000``, when it is the whole answer),
``−5`` (a minus sign) is -5, ``1.5e3`` is 1500, and a percent is its fraction by default, so
``50%`` equals ``0.5`` (``percent: points``: 50% equals 50; ``either``: both readings count). A
unit after the number (``12 kg``) is read and ignored, unless ``units: require`` asks the answer
to carry the reference's unit. The answer's number is the whole answer when it is one number, else
the last number in it ("The answer is 42." reads 42). The reading scans the text once (no
backtracking: model replies are untrusted).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict, is_scalar
from fasteval.suites.scorers.reading import EXTRACT_OPTION, answer_text

# A sign, then digits grouped in threes by , _ or a thin/narrow space, or plain digits, or a bare
# fraction; an optional exponent; then an optional percent sign or unit word. Each part is a run
# of one character class, so a match never backtracks more than a group of three digits.
_NUMBER = re.compile(
    r"(?<![\w.])([-+\u2212]?)"
    r"(\d{1,3}(?:[,_\u2009\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:[eE]([-+]?\d{1,4}))?"
    r"(?!\d)"
    r"[ \u00a0]?(%|percent\b|per cent\b|[^\W\d_][\w/°µ²³]{0,15})?")
_GROUPING = re.compile(r"[,_\u2009\u202f]")
# In a whole answer (not inside prose) a plain space may group thousands too: "1 000", "12 345 678".
_SPACED = re.compile(r"(?<=\d) (?=\d{3}(?!\d))")
_TRAILER = " \t\n\r.,;:!?)]}*`'\""
PERCENT_MODES = ("fraction", "points", "either")


@dataclass(frozen=True, slots=True)
class Reading:
    """A number as written: its value, whether it was a percent, and the unit after it."""

    value: float
    percent: bool
    unit: str
    text: str

    def values(self, mode: str) -> tuple[float, ...]:
        """What it may equal under the percent mode (a percent: its fraction and/or its points)."""
        if not self.percent:
            return (self.value,)
        return {"fraction": (self.value / 100,), "points": (self.value,)}.get(mode, (self.value / 100, self.value))


def _reading(m: re.Match[str]) -> Reading | None:
    sign, digits, exponent, trailer = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    try:
        value = float(_GROUPING.sub("", digits) + (f"e{exponent}" if exponent else ""))
    except ValueError:  # pragma: no cover - the pattern only matches what float() reads
        return None
    if not math.isfinite(value):
        return None
    if sign in ("-", "\u2212"):
        value = -value
    percent = trailer.lower() in ("%", "percent", "per cent")
    return Reading(value, percent, "" if percent else trailer, m.group(0).strip())


def read_numbers(text: str) -> list[Reading]:
    """Every number in ``text``, in order."""
    return [r for m in _NUMBER.finditer(text) if (r := _reading(m)) is not None]


def read_number(text: str) -> Reading | None:
    """The number an answer gives: the whole text when it is one number, else the last one."""
    found = read_numbers(text)
    return found[-1] if found else None


def reference_number(text: str) -> Reading | None:
    """A reference must be exactly one number (with its percent sign or unit)."""
    stripped = _SPACED.sub("", text.strip().rstrip(_TRAILER))
    m = _NUMBER.fullmatch(stripped)
    return _reading(m) if m else None


class Numeric(Scorer):
    """The answer's number equals the reference's within ``abs_tol`` or ``rel_tol``."""

    name = "numeric"
    doc = "a number within a tolerance: thousands separators, units and percents understood (50% = 0.5)"
    options: ClassVar[OptionSchema] = {
        "abs_tol": Opt("float", "absolute tolerance (default 0)"),
        "rel_tol": Opt("float", "relative tolerance, a share of the reference (default 1e-9)"),
        "percent": Opt("str", "a percent is its fraction (default: 50% = 0.5), its points (50% = 50), or either",
                       choices=PERCENT_MODES),
        "units": Opt("str", "ignore (default) or require: the answer must carry the reference's unit",
                     choices=("ignore", "require")),
        "extract": EXTRACT_OPTION,
    }

    def __init__(self, opts: Mapping[str, Any]) -> None:
        super().__init__(opts)
        self.abs_tol = float(opts.get("abs_tol", 0.0))
        self.rel_tol = float(opts.get("rel_tol", 1e-9))
        self.percent = str(opts.get("percent", "fraction"))
        self.require_units = opts.get("units", "ignore") == "require"
        self.extract = str(opts.get("extract", "auto"))

    def _reference(self, reference: Any) -> Reading:
        if isinstance(reference, int | float) and not isinstance(reference, bool):
            return Reading(float(reference), False, "", str(reference))
        reading = reference_number(str(reference))
        if reading is None:
            raise ValueError(f"'answer' {str(reference)[:80]!r} is not one number (scorer 'numeric')")
        return reading

    def check_task(self, reference: Any, options: Mapping[str, str]) -> None:
        super().check_task(reference, options)
        self._reference(reference)

    def equal(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        ref = self._reference(check.reference)
        answer, where = answer_text(check.reply or "", self.extract)
        whole = reference_number(answer)
        got = whole if whole is not None else read_number(answer)
        details: dict[str, Any] = {"read_from": where, "reference": ref.text}
        if got is None:
            return Verdict(0.0, details | {"answer": None, "why": "no number in the answer"})
        details["answer"] = got.text[:100]
        if self.require_units and ref.unit and got.unit.casefold() != ref.unit.casefold():
            return Verdict(0.0, details | {"why": f"unit {got.unit or 'missing'!r}, expected {ref.unit!r}"})
        # Each side may read two ways under ``percent: either``; any pair within tolerance counts.
        ok = any(self.equal(a, r) for a in got.values(self.percent) for r in ref.values(self.percent))
        return Verdict(1.0 if ok else 0.0, details)


def is_number(value: Any) -> bool:
    """Whether a reference reads as one number (a CSV cell "1,000" does)."""
    return is_scalar(value) and (not isinstance(value, str) or reference_number(value) is not None)
