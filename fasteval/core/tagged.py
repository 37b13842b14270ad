"""Text between an opening and a closing tag (``<answer>…</answer>``), found in linear time.

Model replies are untrusted and parsed on the event loop. The obvious regex,
``<answer>(.*?)</answer>``, is quadratic on a reply with many opening tags and no closing one:
every opening tag scans to the end of the text before failing, so a 126 KB Mini-o3 reply
stalled a sweep for 8 s. Here each opening tag is followed by one search for the closing tag,
and once a closing tag is missing no later opening tag can have one, so the scan stops: every
character is examined at most once (``examined`` counts it, for the tests). Matches are the
regex's (``re.S``: contents may span lines; the first closing tag after an opening one ends
it; the next search starts after that closing tag).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

Span = tuple[int, int, int, int]
"""(start of the opening tag, start of the contents, end of the contents, end of the closing tag)."""


@dataclass(frozen=True, slots=True)
class Tagged:
    """An opening and a closing tag; ``ignore_case`` matches them as ``re.I`` would."""

    open: str
    close: str
    ignore_case: bool = False
    _open_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _close_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = re.I if self.ignore_case else 0
        object.__setattr__(self, "_open_re", re.compile(re.escape(self.open), flags))
        object.__setattr__(self, "_close_re", re.compile(re.escape(self.close), flags))

    def _walk(self, text: str) -> Iterator[tuple[Span | None, int]]:
        """Each span with the characters examined to find it; a last ``(None, n)`` for the rest."""
        pos = 0
        while True:
            o = self._open_re.search(text, pos)
            if o is None:
                yield None, len(text) - pos
                return
            c = self._close_re.search(text, o.end())
            if c is None:  # no later opening tag can be closed either: stop here
                yield None, len(text) - pos
                return
            yield (o.start(), o.end(), c.start(), c.end()), c.end() - pos
            pos = c.end() if c.end() > pos else pos + 1

    def spans(self, text: str) -> Iterator[Span]:
        """Every tagged part of ``text``, in order (``re.finditer``'s matches)."""
        for span, _ in self._walk(text):
            if span is not None:
                yield span

    def all(self, text: str) -> list[str]:
        """The contents of every tagged part (``re.findall``)."""
        return [text[s[1]:s[2]] for s in self.spans(text)]

    def first(self, text: str) -> str | None:
        """The contents of the first tagged part (``re.search``), or None."""
        span = next(self.spans(text), None)
        return None if span is None else text[span[1]:span[2]]

    def last(self, text: str) -> str | None:
        """The contents of the last tagged part, or None."""
        found = None
        for span in self.spans(text):
            found = span
        return None if found is None else text[found[1]:found[2]]

    def examined(self, text: str) -> int:
        """Characters the scan of ``text`` looks at (a test's measure of linearity)."""
        return sum(n for _, n in self._walk(text))

    def remove(self, text: str) -> str:
        """``text`` without its tagged parts, tags included (``re.sub`` with "")."""
        out: list[str] = []
        pos = 0
        for start, _, _, end in self.spans(text):
            out.append(text[pos:start])
            pos = end
        out.append(text[pos:])
        return "".join(out)
