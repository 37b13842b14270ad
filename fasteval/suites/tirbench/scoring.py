"""TIR-Bench scoring rules, one pure function per rule of the reference ``calculate_score.py``.

Every function reproduces the reference harness exactly, quirks included (nearest-letter
snapping, exact float equality, "[r, c]" by first pair, set IoU, positional jigsaw accuracy,
OCR substring), because published numbers were computed with them. The only switch is
``fidelity``: the two hard-coded OCR file-name overrides apply only under ``"reference"``.

These functions are the public scoring API that procedural suites (``tir-synth``) import;
``score_item`` is the single dispatcher to call per item.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

AnswerType = Literal[1, 2, 3, 4]
"""``classify_string`` codes: 1 letters (MC), 2 integer, 3 float, 4 anything else (scores 0)."""

# The reference list, duplicate "H" included: the option-text loop lets the last match win.
CHOICE_LETTERS: tuple[str, ...] = ("A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "H")

# Tasks the reference scores by the gold answer's type alone ("safe_tasks").
TYPED_TASKS: frozenset[str] = frozenset(
    {"maze", "color", "rotation_game", "refcoco", "visual_search", "symbolic", "math", "contrast", "instrument"}
)
TASK_TYPES: tuple[str, ...] = (
    "color", "refcoco", "symbolic", "math", "word_search", "ocr", "maze",
    "contrast", "instrument", "spot_difference", "jigsaw", "visual_search", "rotation_game",
)
"""The 13 task types in the paper's table order."""

# Reference OCR overrides: substring tests on image_1, so "160.jpg" also matches "60.jpg".
OCR_ANSWER_OVERRIDES: tuple[tuple[str, str], ...] = (("60.jpg", "mobi"), ("62.jpg", "aires"))

_EXTRACTED_LABEL = "Extracted answer:"
_LABEL_NOISE = re.compile(r"[A-Za-z*:\s]+")
_TWO_NUMBERS = re.compile(r"\b(\d+)\s*,\s*(\d+)\b")
_DIGIT_RUNS = re.compile(r"\d+(?=[,\s]*|\b)")
_NUMBER_SEQUENCE = re.compile(r"[\d\s,，]+")


def clean_extraction(extracted: str | None) -> str:
    """The reference's preprocessing: None becomes '', ``*`` is removed, whitespace stripped."""
    return "" if extracted is None else extracted.replace("*", "").strip()


def classify_string(answer: str) -> AnswerType:
    """Type of a gold answer; ``isalpha`` is Unicode-aware, so Chinese text counts as letters too."""
    if answer.isalpha():
        return 1
    try:
        int(answer)
        return 2
    except ValueError:
        pass
    try:
        float(answer)
        return 3
    except ValueError:
        pass
    return 4


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (unit insert/delete/substitute), as ``Levenshtein.distance``."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def nearest_choice(prediction: str, choices: Sequence[str] = CHOICE_LETTERS) -> str:
    """The choice with the smallest edit distance; ties go to the earliest choice."""
    distances = [edit_distance(prediction, c) for c in choices]
    return choices[distances.index(min(distances))]


def judge_choice(extracted: str, answer: str, prompt: str) -> float:
    """Multiple choice. Single-letter gold: map option text to its letter via the prompt, snap to the
    nearest letter, compare exactly. Multi-letter gold ("CD"): sorted characters must be equal.
    """
    if len(answer) != 1:
        return 1.0 if sorted(extracted) == sorted(answer) else 0.0
    if answer not in CHOICE_LETTERS:
        return 0.0
    extraction = extracted.replace(_EXTRACTED_LABEL, "").strip()
    if extraction not in CHOICE_LETTERS:
        for letter in CHOICE_LETTERS:
            # No break: the reference keeps the last letter whose option text matches.
            if any(f"{letter}{sep}{extraction}" in prompt for sep in (". ", ".", " ", "")):
                extraction = letter
        extraction = nearest_choice(extraction)
    return 1.0 if extraction == answer else 0.0


def _math_verify_equal(extracted: str, answer: str) -> bool:
    """The reference's fallback: math_verify ``verify(parse(extracted), parse(answer))``.

    math_verify's timeouts use SIGALRM, which only works on the main thread; scoring off the
    event loop runs in a worker thread, so there the timeouts are disabled (inputs are short).
    """
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    on_main = threading.current_thread() is threading.main_thread()
    limit = 5 if on_main else None
    try:
        gold = parse(extracted, parsing_timeout=limit)
        target = parse(answer, parsing_timeout=limit)
        return float(verify(gold, target, timeout_seconds=limit)) > 0
    except Exception:
        return False


def _label_free(extracted: str) -> str:
    return _LABEL_NOISE.sub("", extracted.replace(_EXTRACTED_LABEL, "").strip()).strip()


def judge_int(extracted: str, answer: str) -> float:
    """Integer: drop the label, every ASCII letter, ``*``, ``:`` and whitespace, compare as int;
    on failure or mismatch fall back to math_verify on the raw extraction.
    """
    try:
        value = int(_label_free(extracted))
        # The reference rebinds the gold to int only once the extraction parsed, so the
        # fallback below then sees the normalised gold ("+12" -> "12").
        answer = str(int(answer))
        if value == int(answer):
            return 1.0
    except ValueError:
        pass
    return 1.0 if _math_verify_equal(extracted, answer) else 0.0


def judge_float(extracted: str, answer: str) -> float:
    """Float: like ``judge_int`` but with exact float equality (0.30 == 0.3, 0.299 != 0.3)."""
    try:
        value = float(_label_free(extracted))
        answer = str(float(answer))
        if value == float(answer):
            return 1.0
    except ValueError:
        pass
    return 1.0 if _math_verify_equal(extracted, answer) else 0.0


def judge_ocr(response: str | Sequence[str] | None, answer: str, image_1: str, fidelity: str) -> float:
    """Rotated OCR: case-sensitive substring of the gold in the raw response (no extraction).

    Under ``fidelity == "reference"`` the gold of any image_1 containing "60.jpg" / "62.jpg"
    becomes "mobi" / "aires", as the reference hard-codes. A missing response scores 0.
    """
    if isinstance(response, list | tuple):
        response = response[0] if response else None
    if not isinstance(response, str):
        return 0.0
    if fidelity == "reference":
        for needle, override in OCR_ANSWER_OVERRIDES:
            if needle in image_1:
                answer = override
    return 1.0 if answer in response else 0.0


def first_number_pair(text: str) -> tuple[int, int] | None:
    """The first "d, d" pair (any spacing around the comma) in ``text``."""
    match = _TWO_NUMBERS.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def judge_word_search(extracted: str, answer: str) -> float:
    """Word search: integer gold uses ``judge_int``; otherwise first "[r, c]" pairs must match."""
    if classify_string(answer) == 2:
        return judge_int(extracted, answer)
    gold, pred = first_number_pair(answer), first_number_pair(extracted)
    return 1.0 if gold is not None and pred is not None and gold == pred else 0.0


def digit_runs(text: str) -> list[int]:
    """Every run of digits in ``text`` as an int (the reference's ``extract_consecutive_integers``)."""
    return [int(n) for n in _DIGIT_RUNS.findall(text)]


def set_iou(predicted: Sequence[int], gold: Sequence[int]) -> float:
    """|P ∩ G| / |P ∪ G| over sets; two empty sets score 1.0."""
    p, g = set(predicted), set(gold)
    union = p | g
    return 1.0 if not union else len(p & g) / len(union)


def judge_spot_difference(extracted: str, answer: str) -> float:
    """Spot the difference: integer gold (a count) uses ``judge_int``; otherwise the set IoU of
    all numbers in the gold vs all numbers in the extraction (stray numbers lower it).
    """
    if classify_string(answer) == 2:
        return judge_int(extracted, answer)
    return set_iou(digit_runs(extracted), digit_runs(answer))


def first_n_squared_run(text: str, n: int) -> list[int] | None:
    """The first run of digits/spaces/commas (ASCII or full-width) holding exactly n² numbers."""
    for run in _NUMBER_SEQUENCE.findall(text):
        numbers = re.findall(r"\d+", run)
        if len(numbers) == n * n:
            return [int(x) for x in numbers]
    return None


def positional_accuracy(gold: Sequence[int], predicted: Sequence[int]) -> float:
    """Share of positions where the two sequences agree (partial credit, not IoU)."""
    return sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)


def judge_jigsaw(extracted: str, answer: str, difficulty: Any) -> float:
    """Jigsaw n×n (n = ``meta_data['difficulty']``): positional accuracy of the first n²-number
    runs of gold and extraction; a missing run or a bad difficulty scores 0.
    """
    if isinstance(difficulty, float) and difficulty.is_integer():
        difficulty = int(difficulty)  # the reference's n * n works on 3.0 too
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty < 1:
        return 0.0
    gold = first_n_squared_run(answer, difficulty)
    pred = first_n_squared_run(extracted, difficulty)
    if gold is None or pred is None:
        return 0.0
    return positional_accuracy(gold, pred)


def judge_by_answer_type(extracted: str, answer: str, prompt: str) -> float:
    """The reference's rule for every other task: dispatch on ``classify_string(answer)``;
    a type-4 gold (neither letters nor a number) scores 0.
    """
    kind = classify_string(answer)
    if kind == 1:
        return judge_choice(extracted, answer, prompt)
    if kind == 2:
        return judge_int(extracted, answer)
    if kind == 3:
        return judge_float(extracted, answer)
    return 0.0


def scoring_rule(task_type: str, answer: Any) -> str:
    """Name of the rule ``score_item`` applies, recorded in score details for auditing."""
    if task_type in ("ocr", "jigsaw"):
        return task_type
    kind = classify_string(str(answer))
    if task_type == "word_search":
        return "int" if kind == 2 else "pair"
    if task_type == "spot_difference":
        return "int" if kind == 2 else "set_iou"
    return {1: "choice", 2: "int", 3: "float", 4: "invalid_answer"}[kind]


def score_item(
    task_type: str,
    response: str | Sequence[str] | None,
    extracted: str | None,
    answer: Any,
    fidelity: str,
    meta: Mapping[str, Any],
) -> float:
    """Score one item in [0, 1] by the reference rules.

    ``response`` is the model's raw final text (used only by ``ocr``); ``extracted`` is the
    extractor's reply (None counts as ''); ``answer`` is the gold (``str()``-ed here).
    ``meta`` keys: ``prompt`` (option-text mapping), ``image_1`` (OCR overrides),
    ``difficulty`` (jigsaw n). Task types outside the 13 fall back to the answer-type rule,
    so new procedural task types score like the reference's typed tasks.
    """
    gold = str(answer)
    if task_type == "ocr":
        return judge_ocr(response, gold, str(meta.get("image_1", "")), fidelity)
    text = clean_extraction(extracted)
    if task_type == "word_search":
        return judge_word_search(text, gold)
    if task_type == "spot_difference":
        return judge_spot_difference(text, gold)
    if task_type == "jigsaw":
        return judge_jigsaw(text, gold, meta.get("difficulty"))
    return judge_by_answer_type(text, gold, str(meta.get("prompt", "")))


def overall_accuracy(scores: Sequence[float]) -> float:
    """Σ item scores / number of items (fractional jigsaw and IoU scores count as they are)."""
    if not scores:
        raise ValueError("overall accuracy of zero items is undefined")
    return sum(scores) / len(scores)
