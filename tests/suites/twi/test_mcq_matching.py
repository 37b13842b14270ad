"""The reference matchers reproduce each quirk the spec lists (benchmarks-twi.md §0.2, §0.4, §1.3,
§3.3); our fixed reading does not."""

from __future__ import annotations

import pytest

from fasteval.suites.mcq.matching import (
    PREFIXES_MME_SCRIPT,
    can_infer,
    extract_characters_regex,
    fixed_choice,
    lmms_eval_letter,
)
from fasteval.suites.mcq.shuffle import gold_letter, option_order, shown

CHOICES = {"A": "teddy bear", "B": "rabbit", "C": "cat", "D": "dog"}
NUMBERS = {"A": "2", "B": "3", "C": "4", "D": "5"}


def test_can_infer_reads_an_answer_tag_as_no_answer_and_fixed_reads_it() -> None:
    assert can_infer("<answer>B</answer>", CHOICES) is None
    assert fixed_choice("<answer>B</answer>", CHOICES) == ("B", "answer_tag")


def test_can_infer_letter_must_be_among_the_last_four_tokens_except_in_the_hrbench_fork() -> None:
    reply = "B is correct because the animal in the picture has long ears and a short tail"
    assert can_infer(reply, CHOICES, "fork") is None
    assert can_infer(reply, CHOICES, "hrbench") == "B"
    assert can_infer("so the answer is C then, after a long look at the picture", CHOICES, "upstream") == "C"
    assert can_infer("so the answer is C then, after a long look at the picture", CHOICES, "fork") is None


def test_can_infer_length_guard_and_refusal() -> None:
    assert can_infer("There are 3 boats.", NUMBERS) is None  # longer than 2 × Σ option lengths
    assert can_infer("There are 3 boats.", NUMBERS, "hrbench") == "B"
    assert can_infer("Cannot determine the answer", CHOICES) == "Z"
    assert can_infer("a cute rabbit", CHOICES) == "B"


OFFICIAL_CHOICES = ["(A) 458", "(B) 457", "(C) 456", "(D) 455", "(E) This image doesn't feature the data."]


@pytest.mark.parametrize(("output", "extracted"), [
    ("", "A"), ("Best answer: A", "B"), ("Answer: D", "A"), ("According to the image, B", "A"),
    ("<think>The Dock is on the left</think><answer>E</answer>", "D"), ("45", "A"),
    ("there are many many words here and none of them is a capital letter at all", ""),
])
def test_mme_official_script_quirks(output: str, extracted: str) -> None:
    assert extract_characters_regex(output, OFFICIAL_CHOICES, PREFIXES_MME_SCRIPT) == extracted


def test_the_missing_commas_matter_only_in_the_official_copy() -> None:
    assert extract_characters_regex("Best answer: A") == "A"  # VLMEvalKit strips "Best answer:"
    assert extract_characters_regex("Best answer: A", OFFICIAL_CHOICES, PREFIXES_MME_SCRIPT) == "B"
    assert extract_characters_regex("c", ["(A) cat", "(B) dog"]) == "A"


@pytest.mark.parametrize(("reply", "letter"), [
    ("Based on the image", "B"), ("Definitely B", "D"), ("Cannot determine", "C"), ("Clearly C", "C"),
    ("left side", "D"), ("<answer>C</answer>", None), ("\\boxed{A}", None), ("(B) rabbit", "B"),
])
def test_lmms_eval_letter_quirks(reply: str, letter: str | None) -> None:
    assert lmms_eval_letter(reply) == letter


@pytest.mark.parametrize(("reply", "letter"), [
    ("", None), ("   ", None), ("Best answer: A", "A"), ("Answer: D", "D"), ("According to the image, B", None),
    ("<think>The Dock is on the left</think><answer>E</answer>", "E"), ("Based on the image", None),
    ("\\boxed{C}", "C"), ("<answer>(B)</answer>", "B"), ("<answer>rabbit</answer>", "B"),
    ("<answer>B. rabbit</answer>", "B"), ("<answer>B. dog</answer>", None), ("The answer is C.", "C"),
    ("the answer is a dog", None), ("<answer>the answer is b</answer>", "B"), ("<think>maybe A</think>The final answer is **D**", "D"), ("c", None),
])
def test_fixed_reading(reply: str, letter: str | None) -> None:
    opts = {**CHOICES, "E": "none"}
    assert fixed_choice(reply, opts)[0] == letter


def test_option_order_is_deterministic_per_seed_and_moves_the_gold() -> None:
    orders = {seed: option_order("task-1", seed, 4) for seed in range(8)}
    assert orders == {seed: option_order("task-1", seed, 4) for seed in range(8)}
    assert len({tuple(o) for o in orders.values()}) > 1
    assert {gold_letter(0, o) for o in orders.values()} != {"A"}
    pinned = option_order("task-1", 3, 5, pin_last=True)
    assert pinned[-1] == 4 and sorted(pinned) == [0, 1, 2, 3, 4]
    assert shown(["x", "y"], [1, 0]) == {"A": "y", "B": "x"}


def test_deepeyes_rules() -> None:
    from fasteval.suites.vstar.deepeyes import pred_ans, read_judgement, rule_check

    assert pred_ans("<think>x</think><answer>\\boxed{A}</answer>") == "A"
    assert rule_check("A", "A", "A. red") == 1.0 and rule_check("B", "A", "A. red") == 0.0
    assert rule_check("A.", "A", "A. red") == 1.0 and rule_check("B.", "A", "A. red") == 0.0
    assert rule_check("so A. red it is", "A", "A. red") == 1.0 and rule_check("red", "A", "A. red") is None
    assert read_judgement("Judgement: 1") == 1.0 and read_judgement("reasoning... Judgement: 0") == 0.0
    assert read_judgement("1") == 1.0 and read_judgement("yes") == 0.0
