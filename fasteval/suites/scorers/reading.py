"""Where the answer is in a reply, and how text answers are normalised before they are compared.

``extract: auto`` (the default of every rule) reads the answer where a model puts it: the last
``<answer>`` tag, else the last ``\\boxed{}``, else the reply after its reasoning (``</think>``),
the reading our multiple-choice suites use (fasteval.suites.mcq.matching.answer_span, linear in
the reply's length). ``extract: reply`` compares the whole reply.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasteval.core.options import Opt
from fasteval.suites.mcq.matching import answer_span

EXTRACT_OPTION = Opt("str", "where the answer is: auto (<answer> tag, \\boxed{}, else the reply after "
                            "</think>) or reply (the whole reply)", choices=("auto", "reply"))
_ARTICLES = frozenset({"a", "an", "the"})
_EDGE = string.punctuation + string.whitespace + "\u00a0\u3000。，、；：！？「」『』“”‘’«»…"


def answer_text(reply: str, extract: str) -> tuple[str, str]:
    """(the answer part of ``reply``, where it was found)."""
    if extract == "reply":
        return reply.strip(), "reply"
    span, where = answer_span(reply)
    return span.strip(), where


@dataclass(frozen=True, slots=True)
class Normalise:
    """How two text answers are made comparable (each flag is a scorer option)."""

    ignore_case: bool = True
    ignore_punctuation: bool = False
    """Remove every punctuation character; by default only what surrounds the answer goes
    (``Paris.`` = ``"Paris"``)."""
    ignore_articles: bool = False
    unicode: bool = True
    """NFKC: full-width digits and letters, ligatures and the like read as their plain forms."""

    @classmethod
    def from_options(cls, opts: Mapping[str, Any]) -> Normalise:
        return cls(ignore_case=bool(opts.get("ignore_case", True)),
                   ignore_punctuation=bool(opts.get("ignore_punctuation", False)),
                   ignore_articles=bool(opts.get("ignore_articles", False)),
                   unicode=bool(opts.get("unicode", True)))

    def __call__(self, text: str) -> str:
        if self.unicode:
            text = unicodedata.normalize("NFKC", text)
        if self.ignore_case:
            text = text.casefold()
        if self.ignore_punctuation:
            text = "".join(c for c in text if not unicodedata.category(c).startswith("P"))
        words = text.split()
        if self.ignore_articles:
            words = [w for w in words if w.strip(_EDGE).casefold() not in _ARTICLES]
        return " ".join(words).strip(_EDGE)


NORMALISE_OPTIONS = {
    "ignore_case": Opt("bool", "compare case-insensitively (default true)"),
    "ignore_punctuation": Opt("bool", "drop every punctuation mark (default false: only those around the answer)"),
    "ignore_articles": Opt("bool", "drop the words a, an, the (default false)"),
    "unicode": Opt("bool", "NFKC-normalise (full-width forms, ligatures; default true)"),
    "extract": EXTRACT_OPTION,
}
