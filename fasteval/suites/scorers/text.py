"""``exact`` and ``contains``: a text answer compared after normalisation (fasteval.suites.scorers.reading)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict
from fasteval.suites.scorers.reading import NORMALISE_OPTIONS, Normalise, answer_text


class Exact(Scorer):
    """The answer equals the reference once both are normalised."""

    name = "exact"
    doc = "the answer equals the reference (case, spacing and surrounding punctuation ignored by default)"
    options: ClassVar[OptionSchema] = NORMALISE_OPTIONS

    def __init__(self, opts: Mapping[str, Any]) -> None:
        super().__init__(opts)
        self.norm = Normalise.from_options(opts)
        self.extract = str(opts.get("extract", "auto"))

    def matches(self, answer: str, reference: str) -> bool:
        return self.norm(answer) == self.norm(reference)

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        answer, where = answer_text(check.reply or "", self.extract)
        ok = bool(answer) and self.matches(answer, str(check.reference))
        return Verdict(1.0 if ok else 0.0, {"answer": answer[:500], "read_from": where})


class Contains(Exact):
    """The normalised reference occurs in the normalised answer (``whole_words``: as whole words)."""

    name = "contains"
    doc = "the reference occurs in the answer (normalised as exact; whole_words: only as whole words)"
    options: ClassVar[OptionSchema] = {**NORMALISE_OPTIONS,
                                       "whole_words": Opt("bool", "the reference must stand as whole words "
                                                                  "(4 is not in 1400; default false)")}

    def matches(self, answer: str, reference: str) -> bool:
        ref = self.norm(reference)
        if not ref:
            return False
        text = self.norm(answer)
        if not self.opts.get("whole_words", False):
            return ref in text
        return re.search(r"(?<!\w)" + re.escape(ref) + r"(?!\w)", text) is not None
