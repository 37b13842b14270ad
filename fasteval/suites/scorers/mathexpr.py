"""``math``: the answer is mathematically equal to the reference, by math-verify.

math-verify (a base dependency; TIR-Bench's reference scorer uses it too) parses LaTeX and plain
expressions and compares them symbolically: ``\\frac{1}{2}`` = ``0.5``, ``(x+1)^2`` =
``x^2 + 2x + 1``, ``x = 3`` = ``3``. A task's answer without ``$`` delimiters is read as one
formula; a model's answer both as math-verify reads prose and as one formula (either may match). Its
own timeouts need the main thread, so the check runs in a worker thread bounded by ``timeout_s``:
a model's answer that keeps sympy busy longer is not shown equal and scores 0 (the record says
it timed out), as a timed-out math-verify does in TIR-Bench's scorer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict
from fasteval.suites.scorers.reading import EXTRACT_OPTION, answer_text

DEFAULT_TIMEOUT_S = 5.0
MAX_TEXT = 2000
"""Characters of an answer handed to sympy (a longer one is not a final answer)."""


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    found: list[Any] = parse(text, parsing_timeout=None)
    return found


def _readable(parsed: list[Any]) -> bool:
    """math-verify gives the text back alone when it found no formula in it."""
    return any(not isinstance(p, str) for p in parsed)


def parse_reference(text: str) -> list[Any]:
    """A task's answer is a formula: read as LaTeX first (plain reading takes "x^2 + 2x + 1" as 1)."""
    if "$" not in text and "\\boxed" not in text:
        wrapped = _parse(f"${text}$")
        if _readable(wrapped):
            return wrapped
    return _parse(text)


def parse_answers(text: str) -> list[list[Any]]:
    """A model's answer may be prose around a formula (math-verify's own reading) or a bare formula."""
    readings = [_parse(text)]
    if "$" not in text:
        readings.append(_parse(f"${text}$"))
    return [r for r in readings if _readable(r)]


def math_equal(answer: str, reference: str) -> bool | None:
    """Whether math-verify finds ``answer`` equal to ``reference``; None when it cannot read the
    reference (the task's fault, not the model's). Blocking: call it off the event loop."""
    from math_verify import verify

    gold = parse_reference(reference)
    if not _readable(gold):
        return None
    for got in parse_answers(answer):
        try:
            if verify(gold, got, timeout_seconds=None):
                return True
        except Exception:  # sympy raises a zoo of errors on odd input: not shown equal
            continue
    return False


class Math(Scorer):
    """math-verify equivalence of the answer and the reference."""

    name = "math"
    doc = "the answer equals the reference mathematically (math-verify: LaTeX or plain formulas)"
    options: ClassVar[OptionSchema] = {
        "timeout_s": Opt("float", f"longest one check may take (default {DEFAULT_TIMEOUT_S:g}); past it: 0"),
        "extract": EXTRACT_OPTION,
    }

    def __init__(self, opts: Mapping[str, Any]) -> None:
        super().__init__(opts)
        self.timeout_s = float(opts.get("timeout_s", DEFAULT_TIMEOUT_S)) or DEFAULT_TIMEOUT_S
        self.extract = str(opts.get("extract", "auto"))

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        answer, where = answer_text(check.reply or "", self.extract)
        details: dict[str, Any] = {"answer": answer[:500], "read_from": where}
        if not answer:
            return Verdict(0.0, details)
        if len(answer) > MAX_TEXT:
            return Verdict(0.0, details | {"why": f"answer longer than {MAX_TEXT:,} characters"})
        try:
            ok = await asyncio.wait_for(asyncio.to_thread(math_equal, answer, str(check.reference)), self.timeout_s)
        except TimeoutError:
            return Verdict(0.0, details | {"timed_out_s": self.timeout_s})
        if ok is None:
            return Verdict(None, details, error=f"scorer_error: math-verify cannot read the task's answer "
                                                f"{str(check.reference)[:80]!r} as a formula")
        return Verdict(1.0 if ok else 0.0, details)
