"""Untrusted text on a terminal: control characters escaped, Rich markup never parsed.

Model answers, tool output, dataset fields, task ids, HTTP error bodies and log lines are written
by people we do not know. Printed raw, an escape sequence sets the window title, clears the
screen, writes the clipboard (OSC 52) or draws a spoofed hyperlink (OSC 8); passed to Rich as a
``str``, ``[/x]`` raises ``MarkupError`` (and kills the live panel) and ``[link=…]`` becomes a
clickable link. Every such string goes through :func:`clean` before ``print`` and through
:func:`plain` (a ``rich.text.Text``, which Rich never parses for markup) before a table, a panel
or ``Console.print``. The view, the engine and the CLI all use these, so they live in the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from rich.text import Text

# C0 (with DEL) and C1 controls, plus the bidirectional overrides and isolates that reorder what
# a reader sees ("Trojan source"). \n and \t survive only in a block (see clean()).
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F,
             *range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def _visible(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_LINE = {c: _visible(c) for c in _CONTROLS}
_BLOCK = {c: v for c, v in _LINE.items() if c not in (0x0A, 0x09)}
# Inside a JSON document a control character can only sit in a string, where \\u00XX means it.
_JSON = {c: f"\\u{c:04x}" for c in _CONTROLS if c >= 0x7F}


def clean(value: object, *, block: bool = False) -> str:
    """``str(value)`` with every control character shown as ``\\xNN`` (or ``\\uNNNN``).

    ``block=True`` keeps newlines and tabs, for text printed as a block (an answer, code, tool
    output); a carriage return is escaped even there, since it lets a line overwrite itself.
    """
    return str(value).translate(_BLOCK if block else _LINE)


def plain(value: object, *, block: bool = False, style: str = "") -> Text:
    """``clean(value)`` as a Rich ``Text``: printed literally, ``[link=…]`` and all."""
    from rich.text import Text

    return Text(clean(value, block=block), style=style)


def json_text(value: Any, *, indent: bool = True) -> str:
    """JSON of ``value`` safe to print: orjson escapes C0 in strings, this escapes the rest."""
    option = (orjson.OPT_INDENT_2 if indent else 0) | orjson.OPT_NON_STR_KEYS
    return orjson.dumps(value, option=option, default=str).decode().translate(_JSON)
