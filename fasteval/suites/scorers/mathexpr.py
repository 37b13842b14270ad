"""``math``: the answer is mathematically equal to the reference, by math-verify.

math-verify (a base dependency; TIR-Bench's reference scorer uses it too) parses LaTeX and plain
expressions and compares them symbolically: ``\\frac{1}{2}`` = ``0.5``, ``(x+1)^2`` =
``x^2+2x+1``, ``x = 3`` = ``3``. A text without LaTeX delimiters is read as a formula too. Its
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


def parse_math(text: str) -> list[Any]:
    """math-verify's reading of ``text``; a bare formula is retried inside ``$...$``."""
    from math_verify import parse

    found: list[Any] = parse(text, parsing_timeout=None)
    if not found and "$" not in text:
        found = parse(f"${text}$", parsing_timeout=None)
    return found


def math_equal(answer: str, reference: str) -> bool | None:
    """Whether math-verify finds ``answer`` equal to ``reference``; None when it cannot read the
    reference (the task's fault, not the model's). Blocking: call it off the event loop."""
    from math_verify import verify

    gold = parse_math(reference)
    if not any(not isinstance(g, str) for g in gold):  # only the text back: math-verify found no formula
        return None
    got = parse_math(answer)
    if not got:
        return False
    try:
        return bool(verify(gold, got, timeout_seconds=None))
    except Exception:  # sympy raises a zoo of errors on odd input: not shown equal
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
