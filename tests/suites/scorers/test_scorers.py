"""Each scorer of one's own tasks on the answers it is for: right, wrong, and the edge cases users hit
(``1,000`` vs ``1000``, ``50%`` vs ``0.5``, ``(B)`` vs ``B. text``, a pattern that backtracks)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fasteval.suites.scorers import Check, ScoreEnv, Scorers, Verdict, parse_spec
from fasteval.suites.scorers.choice import option_letters
from fasteval.suites.scorers.numeric import read_number

OPTIONS = option_letters(["red", "green", "blue"])


async def grade(spec: Any, reply: str | None, reference: Any, options: dict[str, str] | None = None) -> Verdict:
    scorer = Scorers().get(parse_spec(spec))
    scorer.check_task(reference, options or {})
    return await scorer.grade(Check(reply, reference, "q", options or {}), ScoreEnv())


async def value(spec: Any, reply: str | None, reference: Any, options: dict[str, str] | None = None) -> float | None:
    return (await grade(spec, reply, reference, options)).value


@pytest.mark.parametrize(("spec", "reply", "reference", "expected"), [
    ("exact", "Paris", "paris.", 1.0),
    ("exact", "<think>maybe Lyon</think><answer> Paris </answer>", "Paris", 1.0),
    ("exact", "\\boxed{Paris}", "Paris", 1.0),
    ("exact", "Lyon", "Paris", 0.0),
    ("exact", "The answer is Paris", "Paris", 0.0),
    ("exact", "", "Paris", 0.0),
    ("exact", "１２", 12, 1.0),  # full-width digits read as their plain forms (NFKC)
    ({"name": "exact", "unicode": False}, "１２", 12, 0.0),
    ({"name": "exact", "ignore_case": False}, "paris", "Paris", 0.0),
    ({"name": "exact", "ignore_articles": True}, "The Eiffel Tower", "Eiffel tower", 1.0),
    ("exact", "The Eiffel Tower", "Eiffel tower", 0.0),
    ({"name": "exact", "ignore_punctuation": True}, "U.S.A.", "USA", 1.0),
    ("exact", "U.S.A.", "USA", 0.0),
    ({"name": "exact", "extract": "reply"}, "<answer>Paris</answer>", "Paris", 0.0),
    ("contains", "The answer is Paris, of course.", "paris", 1.0),
    ("contains", "Lyon", "Paris", 0.0),
    ("contains", "in 1400 AD", "4", 1.0),
    ({"name": "contains", "whole_words": True}, "in 1400 AD", "4", 0.0),
    ({"name": "contains", "whole_words": True}, "it is 4.", "4", 1.0),
])
async def test_exact_and_contains(spec: Any, reply: str, reference: Any, expected: float) -> None:
    assert await value(spec, reply, reference) == expected


@pytest.mark.parametrize(("spec", "reply", "reference", "expected"), [
    ("numeric", "1,000", "1000", 1.0),
    ("numeric", "1000", "1,000", 1.0),
    ("numeric", "1 000", 1000, 1.0),
    ("numeric", "1,000,000.5 dollars", 1000000.5, 1.0),
    ("numeric", "1,001", "1000", 0.0),
    ("numeric", "50%", "0.5", 1.0),
    ("numeric", "0.5", "50%", 1.0),
    ("numeric", "50 percent", 0.5, 1.0),
    ("numeric", "50", "50%", 0.0),  # a percent is its fraction by default
    ({"name": "numeric", "percent": "points"}, "50", "50%", 1.0),
    ({"name": "numeric", "percent": "points"}, "0.5", "50%", 0.0),
    ({"name": "numeric", "percent": "either"}, "50", "50%", 1.0),
    ({"name": "numeric", "percent": "either"}, "0.5", "50%", 1.0),
    ("numeric", "The answer is 42.", 42, 1.0),
    ("numeric", "<answer>x = −5</answer>", -5, 1.0),
    ("numeric", "1.5e3", "1500", 1.0),
    ("numeric", "41", 42, 0.0),
    ("numeric", "no idea", 42, 0.0),
    ("numeric", "3.14", "3.14159", 0.0),
    ({"name": "numeric", "abs_tol": 0.01}, "3.14", "3.14159", 1.0),
    ({"name": "numeric", "abs_tol": 0.001}, "3.14", "3.14159", 0.0),
    ({"name": "numeric", "rel_tol": 0.05}, "102", "100", 1.0),
    ({"name": "numeric", "rel_tol": 0.01}, "102", "100", 0.0),
    ("numeric", "12 kg", "12", 1.0),
    ({"name": "numeric", "units": "require"}, "12 kg", "12 kg", 1.0),
    ({"name": "numeric", "units": "require"}, "12 g", "12 kg", 0.0),
    ({"name": "numeric", "units": "require"}, "12", "12 kg", 0.0),
])
async def test_numeric(spec: Any, reply: str, reference: Any, expected: float) -> None:
    assert await value(spec, reply, reference) == expected


def test_numeric_refuses_a_reference_that_is_not_one_number_and_reads_hostile_text_once() -> None:
    scorer = Scorers().get(parse_spec("numeric"))
    for bad in ("about 5", "five", "1,5", ""):
        with pytest.raises(ValueError, match="not one number|must be"):
            scorer.check_task(bad, {})
    assert read_number("9" * 100_000) is None  # not a finite number: no answer, not infinity
    found = read_number("1" + "0" * 300 + " kg")
    assert found is not None and (found.value, found.unit) == (1e300, "kg")


@pytest.mark.parametrize(("spec", "reply", "reference", "expected"), [
    ("regex", "42", "4[0-9]", 1.0),
    ("regex", "142", "4[0-9]", 0.0),
    ({"name": "regex", "mode": "search"}, "it is 142", "4[0-9]", 1.0),
    ("regex", "PARIS", "paris", 0.0),
    ({"name": "regex", "ignore_case": True}, "PARIS", "paris", 1.0),
    ("regex", "<answer>2024-05-01</answer>", r"\d{4}-\d{2}-\d{2}", 1.0),
])
async def test_regex(spec: Any, reply: str, reference: Any, expected: float) -> None:
    assert await value(spec, reply, reference) == expected


def test_regex_refuses_bad_and_overlong_patterns_at_load() -> None:
    scorer = Scorers().get(parse_spec("regex"))
    with pytest.raises(ValueError, match="not a valid regular expression"):
        scorer.check_task("(unclosed", {})
    with pytest.raises(ValueError, match="a pattern of 5,000 characters"):
        scorer.check_task("a" * 5000, {})


async def test_a_backtracking_pattern_is_a_scorer_error_and_the_loop_keeps_running() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    verdict = await grade({"name": "regex", "timeout_s": 0.3}, "a" * 5000 + "b", "(a|aa)+$")
    task.cancel()
    assert verdict.value is None and verdict.error is not None
    assert verdict.error.startswith("scorer_error: the task's pattern ran past 0.3 s")
    assert ticks > 3  # the match ran off the event loop


@pytest.mark.parametrize(("reply", "reference", "expected"), [
    ("(B)", "B", 1.0),
    ("B", "(B)", 1.0),
    ("B. green", "(B)", 1.0),
    ("(B)", "B. green", 1.0),
    ("<answer>green</answer>", "B", 1.0),
    ("The answer is B.", "green", 1.0),
    ("B. blue", "B", 0.0),  # B with C's text names no option
    ("A", "B", 0.0),
    ("", "B", 0.0),
    ("I cannot tell", "B", 0.0),
])
async def test_choice(reply: str, reference: str, expected: float) -> None:
    assert await value("choice", reply, reference, OPTIONS) == expected


def test_choice_needs_options_that_name_the_answer() -> None:
    scorer = Scorers().get(parse_spec("choice"))
    with pytest.raises(ValueError, match="needs the task's 'options'"):
        scorer.check_task("B", {})
    with pytest.raises(ValueError, match="names none of the options A, B, C"):
        scorer.check_task("D", OPTIONS)
    assert option_letters({"A": "x", "B": 2}) == {"A": "x", "B": "2"}
    with pytest.raises(ValueError, match="single capital letters"):
        option_letters({"a": "x"})


@pytest.mark.parametrize(("reply", "reference", "expected"), [
    ("\\frac{1}{2}", "0.5", 1.0),
    ("The result is $\\boxed{\\frac{\\pi}{2}}$", "\\pi/2", 1.0),
    ("<answer>(x+1)^2</answer>", "x^2+2x+1", 1.0),
    ("x = 3", "3", 1.0),
    ("4", "3", 0.0),
    ("no formula here", "3", 0.0),
])
async def test_math(reply: str, reference: str, expected: float) -> None:
    assert await value("math", reply, reference) == expected


async def test_math_says_when_the_task_answer_is_no_formula() -> None:
    verdict = await grade("math", "3", "???")
    assert verdict.value is None and verdict.error is not None and "cannot read the task's answer" in verdict.error


async def test_any_of_tries_each_answer_with_its_scorer() -> None:
    assert await value("any_of", "Paris, France", ["Paris", "Paris, France"]) == 1.0
    assert await value("any_of", "Lyon", ["Paris", "Paris, France"]) == 0.0
    v = await grade({"name": "any_of", "of": "numeric"}, "0.5", ["0.33", "50%"])
    assert v.value == 1.0 and v.details["matched"] == 1
    assert parse_spec({"name": "any_of", "of": {"name": "numeric", "abs_tol": 1}}).label == "any_of(numeric)"
    with pytest.raises(ValueError, match="answer 0: .*not one number"):
        Scorers().get(parse_spec({"name": "any_of", "of": "numeric"})).check_task(["x"], {})


def test_specs_are_checked_with_names_that_say_what_is_wrong() -> None:
    assert parse_spec('{"name": "numeric", "abs_tol": 0.5}').options == {"abs_tol": 0.5}
    assert parse_spec("contains") == parse_spec({"name": "contains"})
    with pytest.raises(ValueError, match="unknown scorer 'fuzzy'; known: exact, contains, numeric"):
        parse_spec("fuzzy")
    with pytest.raises(ValueError, match="scorer 'numeric' has no option 'tolerance' \\(known: abs_tol"):
        parse_spec({"name": "numeric", "tolerance": 1})
    with pytest.raises(ValueError, match="option 'percent' must be one of fraction, points, either"):
        parse_spec({"name": "numeric", "percent": "yes"})
    with pytest.raises(ValueError, match="option 'abs_tol' must be a number"):
        parse_spec({"name": "numeric", "abs_tol": "big"})
    with pytest.raises(ValueError, match="any_of cannot hold 'judge'"):
        parse_spec({"name": "any_of", "of": "judge"})
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_spec('{"name": numeric}')
