"""``regex``: the task's answer is a pattern the model's answer must match.

The pattern is the task author's, the text it runs on is the model's: a pattern that backtracks
catastrophically (``(a+)+$``) on a crafted reply would hold the event loop for minutes with
Python's ``re`` (reliability.md, "hostile model text"). So patterns run on the ``regex`` engine,
which stops a match after ``timeout_s``, in a worker thread that releases the GIL; a match that
runs past it is a scorer error on the record (the pattern needs fixing), never a wrong answer.
Patterns are compiled when the task loads: one that does not compile, or is longer than
``MAX_PATTERN`` characters, is that row's load error.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict
from fasteval.suites.scorers.reading import EXTRACT_OPTION, answer_text

MAX_PATTERN = 2000
"""Characters of a pattern: a longer one is not an answer key but a program."""
MAX_TEXT = 100_000
"""Characters of the answer a pattern runs on (the rest of a runaway reply is not read)."""
DEFAULT_TIMEOUT_S = 1.0
_MEMO = 1024


class Regex(Scorer):
    """The answer matches the task's pattern (whole answer by default; ``mode: search``: anywhere)."""

    name = "regex"
    doc = "the answer matches the task's answer as a regular expression (time-bounded)"
    options: ClassVar[OptionSchema] = {
        "mode": Opt("str", "full (default: the whole answer must match) or search (anywhere in it)",
                    choices=("full", "search")),
        "ignore_case": Opt("bool", "match case-insensitively (default false)"),
        "timeout_s": Opt("float", f"longest a match may run (default {DEFAULT_TIMEOUT_S:g}); past it the record "
                                  "has a scorer error"),
        "extract": EXTRACT_OPTION,
    }

    def __init__(self, opts: Mapping[str, Any]) -> None:
        super().__init__(opts)
        self.search = opts.get("mode", "full") == "search"
        self.ignore_case = bool(opts.get("ignore_case", False))
        self.timeout_s = float(opts.get("timeout_s", DEFAULT_TIMEOUT_S)) or DEFAULT_TIMEOUT_S
        self.extract = str(opts.get("extract", "auto"))
        self._compiled: OrderedDict[str, Any] = OrderedDict()

    def compile(self, pattern: str) -> Any:
        """The compiled pattern (remembered); ValueError for one that is too long or invalid."""
        hit = self._compiled.get(pattern)
        if hit is not None:
            self._compiled.move_to_end(pattern)
            return hit
        if len(pattern) > MAX_PATTERN:
            raise ValueError(f"'answer' is a pattern of {len(pattern):,} characters (at most {MAX_PATTERN:,})")
        import regex  # here: only tasks scored by a pattern load the engine

        try:
            compiled = regex.compile(pattern, (regex.IGNORECASE if self.ignore_case else 0) | regex.VERSION0)
        except (regex.error, OverflowError, RecursionError) as e:
            raise ValueError(f"'answer' {pattern[:80]!r} is not a valid regular expression ({e})") from None
        self._compiled[pattern] = compiled
        if len(self._compiled) > _MEMO:
            self._compiled.popitem(last=False)
        return compiled

    def check_task(self, reference: Any, options: Mapping[str, str]) -> None:
        if not isinstance(reference, str) or not reference:
            raise ValueError("'answer' must be a non-empty pattern string for scorer 'regex'")
        self.compile(reference)

    def _match(self, compiled: Any, text: str) -> bool:
        method = compiled.search if self.search else compiled.fullmatch
        return method(text, timeout=self.timeout_s, concurrent=True) is not None

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        compiled = self.compile(str(check.reference))
        answer, where = answer_text(check.reply or "", self.extract)
        text = answer[:MAX_TEXT]
        details: dict[str, Any] = {"answer": answer[:500], "read_from": where, "mode": "search" if self.search else "full"}
        try:
            ok = await asyncio.to_thread(self._match, compiled, text)
        except TimeoutError:
            return Verdict(None, details, error=f"scorer_error: the task's pattern ran past {self.timeout_s:g} s on "
                                                f"this answer ({len(text):,} characters): it backtracks; simplify it "
                                                "or raise the regex scorer's timeout_s")
        return Verdict(1.0 if ok else 0.0, details)
