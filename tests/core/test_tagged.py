"""Tagged text is found as the regex ``<open>(.*?)<close>`` (re.S) finds it, in one pass."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fasteval.core.tagged import Tagged

ANSWER = Tagged("<answer>", "</answer>")
ANSWER_I = Tagged("<answer>", "</answer>", ignore_case=True)
FENCE = Tagged("```", "```")
_PIECES = ["<answer>", "</answer>", "<ANSWER>", "</Answer>", "<answer", "answer>", "x", "\n", " ", "é", "```", "`"]
texts = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_matches_are_the_regexs(text: str) -> None:
    for tagged, flags in ((ANSWER, re.S), (ANSWER_I, re.S | re.I), (FENCE, re.S)):
        pattern = re.compile(re.escape(tagged.open) + "(.*?)" + re.escape(tagged.close), flags)
        assert tagged.all(text) == pattern.findall(text)
        m = pattern.search(text)
        assert tagged.first(text) == (m.group(1) if m else None)
        assert tagged.last(text) == (pattern.findall(text) or [None])[-1]
        assert tagged.remove(text) == pattern.sub("", text)
        assert [(s[0], s[3]) for s in tagged.spans(text)] == [m.span() for m in pattern.finditer(text)]


ADVERSARIAL = [
    "<answer>" * 25_000,  # 200 KB of opening tags, none closed: the regex rescans the rest from each
    "<answer>x" * 22_222,
    "<answer>" + "</answer" * 25_000,
    "</answer>" * 22_222,
    ("<answer>" * 1000 + "</answer>") * 22,
    "<ANSWER>" + "<answer>" * 25_000,
]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ADVERSARIAL), st.integers(0, 5000), st.sampled_from([ANSWER, ANSWER_I]))
def test_each_character_is_examined_at_most_once(text: str, cut: int, tagged: Tagged) -> None:
    """Linear by count, not by clock: the scan looks at no character twice, however the tags fall."""
    text = text[cut:]
    assert tagged.examined(text) <= len(text)
    assert tagged.first(text) is None or "</answer>" in text.lower()
