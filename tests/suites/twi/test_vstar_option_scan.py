"""V*'s option scanner: the same options as the pattern the loader and lmms-eval use, in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fasteval.suites.vstar.option_scan import find_options

_PATTERN = re.compile(r"\(([A-D])\)\s*([^()]+?)(?=\s*\([A-D]\)|$)")
_PIECES = st.sampled_from(["(A)", "(B)", "(D)", "(E)", "(", ")", " ", "  ", "\n", "\t", "\u2003", "x", "red", "A"])


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=16).map("".join))
def test_the_scanner_finds_what_the_pattern_finds(text: str) -> None:
    assert find_options(text) == _PATTERN.findall(text) == re.compile(_PATTERN.pattern, re.S).findall(text)


def test_the_published_layout_reads_as_four_options() -> None:
    text = "What is the color of the cup?\n(A) red\n(B) blue (C) white\n(D) black\n"
    assert find_options(text) == [("A", "red"), ("B", "blue"), ("C", "white"), ("D", "black")]  # `$` matches before a final newline


def test_a_hostile_row_of_spaces_is_read_in_one_pass() -> None:
    """100k spaces between two words: the pattern needs minutes (a lookahead over the run at each step),
    the scanner a few hundred thousand steps."""
    text = "(A) a" + " " * 100_000 + "b (B)" + "\t" * 100_000
    assert find_options(text) == [("A", "a" + " " * 100_000 + "b"), ("B", "\t")]
