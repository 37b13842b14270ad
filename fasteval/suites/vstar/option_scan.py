"""V*'s ``(A) red (B) blue`` options, read in one pass.

The loader, lmms-eval's prompt and its scorer use the pattern
``\\(([A-D])\\)\\s*([^()]+?)(?=\\s*\\([A-D]\\)|$)``: a lazy body whose every step re-runs a lookahead
over the whitespace that follows, so a hostile row with a long run of spaces costs quadratic time
(100k spaces: minutes). ``find_options`` gives exactly what ``re.findall`` gives with that pattern
(a hypothesis test checks it against the regex), with each whitespace run measured once.
"""

from __future__ import annotations

_LETTERS = "ABCD"


def _label_at(text: str, i: int) -> bool:
    return text.startswith("(", i) and i + 2 < len(text) and text[i + 1] in _LETTERS and text[i + 2] == ")"


def _run_ends(text: str) -> list[int]:
    """``ends[i]``: the first index at or after ``i`` that is not whitespace (``\\s``, as ``str.isspace``)."""
    ends = [len(text)] * (len(text) + 1)
    for i in range(len(text) - 1, -1, -1):
        ends[i] = ends[i + 1] if text[i].isspace() else i
    return ends


def _at_end(text: str, e: int) -> bool:
    """Where ``$`` matches without MULTILINE: the end, or just before a final newline."""
    return e == len(text) or (e == len(text) - 1 and text[e] == "\n")


def _body_end(text: str, ends: list[int], k: int) -> int | None:
    """Where the lazy body from ``k`` stops: the first end the lookahead accepts, None at a parenthesis."""
    e = k
    while e < len(text) and text[e] not in "()":
        e += 1
        if _at_end(text, e) or _label_at(text, ends[e]):
            return e
    return None


def find_options(text: str) -> list[tuple[str, str]]:
    """Every ``(letter, body)`` the pattern finds, in order, as ``re.findall`` returns them."""
    ends = _run_ends(text)
    found: list[tuple[str, str]] = []
    i = text.find("(")
    while i != -1:
        if not _label_at(text, i):
            i = text.find("(", i + 1)
            continue
        j = i + 3
        w = ends[j]
        match: tuple[int, int] | None = None
        if w < len(text) and text[w] not in "()":
            end = _body_end(text, ends, w)
            if end is not None:
                match = (w, end)
        elif w > j and (_at_end(text, w) or _label_at(text, w)):
            match = (w - 1, w)  # \s* gives its last character back: the body is that one space
        if match is None:
            i = text.find("(", i + 1)
            continue
        found.append((text[i + 1], text[match[0]:match[1]]))
        i = text.find("(", match[1])
    return found
