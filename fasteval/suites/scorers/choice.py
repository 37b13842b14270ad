"""``choice``: a multiple-choice answer, read as our multiple-choice suites read it.

The model's letter comes from fasteval.suites.mcq.matching.fixed_choice: an ``<answer>`` tag, a
``\\boxed{}``, a final "answer is X", or the whole reply, as a letter (``B``, ``(B)``, ``B.``), as
``B. text`` naming B's own text, or as one option's text; nothing else counts (no first capital
anywhere, and an empty reply is no answer). The task's answer is read the same way, so ``(B)``,
``B``, ``B. Paris`` and ``Paris`` all name option B.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from fasteval.core.options import OptionSchema
from fasteval.suites.mcq.matching import fixed_choice
from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_letters(options: Any) -> dict[str, str]:
    """A task's options as letter -> text: a list is lettered A, B, ...; a mapping keeps its letters.

    ValueError for anything else (more than 26 options, keys that are not single capitals, texts
    that are not strings or numbers).
    """
    if isinstance(options, list):
        if len(options) > len(LETTERS):
            raise ValueError(f"'options' has {len(options)} entries (at most {len(LETTERS)})")
        pairs = list(zip(LETTERS, options, strict=False))
    elif isinstance(options, dict):
        pairs = list(options.items())
        bad = [k for k, _ in pairs if not (isinstance(k, str) and len(k) == 1 and k in LETTERS)]
        if bad:
            raise ValueError(f"'options' keys must be single capital letters, got {str(bad[0])[:20]!r}")
    else:
        raise ValueError(f"'options' must be a list of option texts or an object of letter: text, "
                         f"got {type(options).__name__}")
    out = {}
    for letter, text in pairs:
        if not isinstance(text, str | int | float) or isinstance(text, bool) or str(text).strip() == "":
            raise ValueError(f"'options' {letter}: must be a non-empty text")
        out[letter] = str(text)
    return out


def reference_letter(reference: Any, options: Mapping[str, str]) -> str:
    """The option a task's answer names; ValueError when it names none of them."""
    letter, _ = fixed_choice(str(reference), options)
    if letter is None:
        raise ValueError(f"'answer' {str(reference)[:80]!r} names none of the options {', '.join(options)} "
                         "(give a letter, (B), B. text, or one option's exact text)")
    return letter


class Choice(Scorer):
    """The option the answer picks is the task's."""

    name = "choice"
    doc = "the option the answer picks (a letter, (B), B. text, or an option's text) is the task's"
    options: ClassVar[OptionSchema] = {}

    def check_task(self, reference: Any, options: Mapping[str, str]) -> None:
        super().check_task(reference, options)
        if not options:
            raise ValueError("scorer 'choice' needs the task's 'options'")
        reference_letter(reference, options)

    async def grade(self, check: Check, env: ScoreEnv) -> Verdict:
        gold = reference_letter(check.reference, check.options)
        letter, where = fixed_choice(check.reply, check.options)
        return Verdict(1.0 if letter == gold else 0.0, {"chosen": letter, "gold": gold, "read_from": where})
