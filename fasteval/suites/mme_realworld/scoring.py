"""MME-RealWorld's three reference scorers (§3.3), one function each, quirks included.

- ``official``: the script's own ``extract_characters_regex`` (two prefixes lost to missing
  commas; the fallback searches the row's real choices, so an empty output is "A").
- ``vlmevalkit``: the ``<answer>`` group upper-cased, then §0.4 with the default choices; an
  empty prediction cell crashes VLMEvalKit's evaluation (TypeError), which we report as this
  item's scoring error rather than a number.
- ``lmms-eval``: §0.4 on the raw reply, then ``pred == answer or answer in pred`` (lower-cased).
"""

from __future__ import annotations

from collections.abc import Mapping

from fasteval.core.tagged import Tagged
from fasteval.suites.mcq.matching import PREFIXES_MME_SCRIPT, extract_characters_regex

SCORERS = ("official", "vlmevalkit", "lmms-eval")
EMPTY_CRASH = "VLMEvalKit's MMERealWorld.evaluate raises TypeError on an empty prediction (one kills the whole run)"
_ANSWER = Tagged("<answer>", "</answer>")


def answer_choices(options: Mapping[str, str]) -> list[str]:
    """The "(A) text" choice strings as the release writes them."""
    return [f"({k}) {v}" for k, v in options.items()]


def official_letter(output: str, options: Mapping[str, str]) -> str:
    return extract_characters_regex(output, answer_choices(options), PREFIXES_MME_SCRIPT)


def vlmevalkit_letter(prediction: str) -> str:
    tag = _ANSWER.first(prediction)
    pred = tag.strip().upper() if tag is not None else prediction
    return extract_characters_regex(pred)


def reference_verdict(scorer: str, output: str | None, options: Mapping[str, str], gold: str) -> tuple[
        float | None, str | None, str | None]:
    """(score, extracted letter, error) under ``scorer``; ``output`` None is the empty cell."""
    text = output or ""
    if scorer == "official":
        letter = official_letter(text, options)
        return (1.0 if letter == gold else 0.0), letter, None
    if scorer == "vlmevalkit":
        if not text:
            return None, None, EMPTY_CRASH
        letter = vlmevalkit_letter(text)
        return (1.0 if letter and letter == gold else 0.0), letter, None
    letter = extract_characters_regex(text)
    right = letter.lower() == gold.lower() or gold.lower() in letter.lower()
    return (1.0 if right else 0.0), letter, None
