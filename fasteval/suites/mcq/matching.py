"""Answer matching for multiple-choice suites: the reference rules, ported, and our fixed rule.

Every reference function reproduces one scorer named in /work/shared/benchmarks-twi.md (written
from the rule, never copied from its code), quirks included, because published numbers were
computed with them:

- ``can_infer`` — VLMEvalKit's heuristic matcher (§0.2) in three pinned versions: ``upstream``
  (e8e78f05), ``fork`` (the DeepEyesV2 / Thyme copies: no "answer is X" regex) and ``hrbench``
  (the HR-Bench repo's copy: no last-four-tokens rule, no length guard).
- ``extract_characters_regex`` — VLMEvalKit's / lmms-eval's first-capital rule (§0.4), and the
  MME-RealWorld script's copy with its two missing commas (§3.3).
- ``lmms_eval_letter`` — lmms-eval's ``extract_answer_letter`` for V* (§1.3).

``fixed_choice`` is ours: the answer is read only from where a model puts it (an <answer> tag,
``\\boxed{}``, a final "answer is X"), as a letter or as the unique option text; nothing else in
the reply counts, and an empty reply is no answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from fasteval.core.tagged import Tagged

MatcherVersion = Literal["upstream", "fork", "hrbench"]
MATCHER_VERSIONS: tuple[str, ...] = ("upstream", "fork", "hrbench")

# can_infer_option's refusal phrases (§0.2 step 1.2): any of them reads as the "no option" Z.
_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_API_FAILURE = "Failed to obtain answer via API"
_SPLIT_CHARS = ".()[],:;!*#{}"
_ANSWER_IS = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")


def _tokens(answer: str) -> list[str]:
    for ch in _SPLIT_CHARS:
        answer = answer.replace(ch, " ")
    return answer.split()


def can_infer_option(answer: str, choices: Mapping[str, str], version: MatcherVersion = "upstream") -> str | None:
    """The letter a prediction names as a whole token (§0.2 step 1); None when it names none."""
    if _API_FAILURE in answer:
        return None
    if any(r in answer for r in _REFUSALS):
        return "Z"
    tokens = _tokens(answer)
    named = [c for c in choices if c in tokens]
    if len(named) == 1:
        letter = named[0]
        # Only a letter among the last four tokens counts ("B is correct because ..." fails).
        if version == "hrbench" or tokens.index(letter) > len(tokens) - 5:
            return letter
    elif not named and "Z" in tokens:
        return "Z"
    if version == "upstream":
        m = _ANSWER_IS.search(answer)
        if m and m.group(1).upper() in choices:
            return m.group(1).upper()
    return None


def can_infer_text(answer: str, choices: Mapping[str, str], version: MatcherVersion = "upstream") -> str | None:
    """The letter whose option text alone appears in the prediction (§0.2 step 2)."""
    answer = answer.lower()
    if version != "hrbench" and len(answer) > 2 * sum(len(str(v)) for v in choices.values()):
        return None
    found = [k for k, v in choices.items() if str(v).lower() in answer]
    return found[0] if len(found) == 1 else None


def can_infer(answer: str, choices: Mapping[str, str], version: MatcherVersion = "upstream") -> str | None:
    """VLMEvalKit's ``can_infer``: the option rule, else the text rule, else None (its False)."""
    return can_infer_option(answer, choices, version) or can_infer_text(answer, choices, version)


# §0.4: the prefixes VLMEvalKit and lmms-eval strip before looking for a capital letter.
PREFIXES_VLMEVALKIT: tuple[str, ...] = (
    "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is", "The correct option is", "Best answer:", "Best option:",
)
# §3.3: MME-RealWorld's script lacks two commas, so Python joins those pairs into one string each.
PREFIXES_MME_SCRIPT: tuple[str, ...] = (
    "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option isThe correct option is", "Best answer:Best option:",
)
DEFAULT_CHOICES: tuple[str, ...] = ("(A)", "(B)", "(C)", "(D)", "(E)")
_CAPITAL = re.compile(r"[ABCDE]")


def extract_characters_regex(s: str, choices: Sequence[str] = DEFAULT_CHOICES,
                             prefixes: Sequence[str] = PREFIXES_VLMEVALKIT) -> str:
    """The first capital A-E anywhere after the prefixes go; else the letter of the first choice
    containing the whole (lower-cased) text, so '' and whitespace read as A; else ''."""
    s = s.strip()
    for prefix in prefixes:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not _CAPITAL.search(s):
        return ""
    m = _CAPITAL.search(s)
    if m is None:
        for choice in choices:
            if s.lower() in choice.lower():
                return choice[1]
        return ""
    return m.group(0)


_LMMS_PATTERNS = (
    re.compile(r"^([A-D])\s*[\.)\]]*"),
    re.compile(r"(?:THE\s+)?(?:ANSWER|CHOICE|OPTION)(?:\s+IS)?[\s:]+([A-D])"),
    re.compile(r"\(([A-D])\)"),
    re.compile(r"([A-D])\s*(?:\.|\)|])"),
    re.compile(r"(?:^|\s)([A-D])(?:\s|$)"),
)


def lmms_eval_letter(response: str) -> str | None:
    """lmms-eval's V* ``extract_answer_letter`` (§1.3): five patterns on the upper-cased reply,
    then a lone A-D character anywhere, then a leading A-D; so "Based on ..." reads as B."""
    text = response.upper().strip()
    for pattern in _LMMS_PATTERNS:
        m = pattern.search(text)
        if m:
            return m.group(1)
    letters = [c for c in text if c in "ABCD"]
    if len(letters) == 1:
        return letters[0]
    if text and text[0] in "ABCD":
        return text[0]
    return None


_ANSWER_TAG = Tagged("<answer>", "</answer>", ignore_case=True)
_THINK_END = re.compile(r"</think>", re.I)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_FINAL_ANSWER = re.compile(
    r"(?i:final\s+answer|answer|option|choice)\s*(?i:is|:)?\s*[:\-]?\s*\**\(?([A-Z])\)?\**(?=[\s.,;:!)*]|$)")
# A lower-case letter counts only as the very end of the span ("the answer is b."), never "is a dog".
_FINAL_LOWER = re.compile(r"(?i:answer|option|choice)\s*(?i:is|:)?\s*\**\(?([a-z])\)?\**[.!]?\s*$")
_LEAD_LETTER = re.compile(r"^\(?([A-Z])\)?(?:[.:)\s]|$)")
_TRIM = " \t\n\r*`'\".:;!"


def answer_span(text: str) -> tuple[str, str]:
    """Where the answer is: (the text of the last <answer> tag | last \\boxed{} | the reply after
    its reasoning, how it was found). Reasoning in <think> never counts."""
    tags = _ANSWER_TAG.all(text)
    if tags:
        inner = _BOXED.findall(tags[-1])
        return (inner[-1], "answer_tag:boxed") if inner else (tags[-1], "answer_tag")
    ends = list(_THINK_END.finditer(text))
    tail = text[ends[-1].end():] if ends else text
    boxed = _BOXED.findall(tail)
    if boxed:
        return boxed[-1], "boxed"
    return tail, "reply"


def _option_key(text: str) -> str:
    return " ".join(text.lower().strip(_TRIM).split())


def _letter_of(span: str, options: Mapping[str, str]) -> str | None:
    """A span that is a letter ("B", "(B)", "B.", "B. text" naming B's own text) or one option's text."""
    s = span.strip(_TRIM)
    if not s:
        return None
    m = _LEAD_LETTER.match(s)
    if m and m.group(1) in options:
        rest = _option_key(s[m.end():])
        if not rest or rest == _option_key(options[m.group(1)]):
            return m.group(1)
        return None
    key = _option_key(s)
    hits = [k for k, v in options.items() if _option_key(str(v)) == key]
    return hits[0] if len(hits) == 1 else None


def fixed_choice(text: str | None, options: Mapping[str, str]) -> tuple[str | None, str]:
    """Our rule: (letter or None, where it came from). The answer must be in an <answer> tag, a
    \\boxed{}, a final "answer is X" / "Answer: X", or be the whole reply; a letter or the unique
    option text. No first-capital-anywhere, and an empty reply is no answer (never A)."""
    if text is None or not text.strip():
        return None, "empty"
    span, where = answer_span(text)
    letter = _letter_of(span, options)
    if letter is not None:
        return letter, where
    finals = [m.group(1).upper() for m in _FINAL_ANSWER.finditer(span)]
    finals = [f for f in finals if f in options]
    lower = _FINAL_LOWER.search(span)
    if lower and lower.group(1).upper() in options:
        finals.append(lower.group(1).upper())
    if finals:
        return finals[-1], f"{where}:answer_is"
    return None, f"{where}:unreadable"
