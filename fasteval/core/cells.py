"""Untrusted text in the tables we write for other programs: spreadsheets and Markdown renderers.

A model, suite or setting name, or a ``--published`` file's paper and table, is someone else's
text. In a CSV cell a spreadsheet runs it when it starts like a formula (``=HYPERLINK(...)``,
``@SUM(...)``, ``+cmd``, ``-2+3``); in a Markdown cell a renderer turns ``<img onerror=...>``
into HTML. Each writer passes every such cell through one of these; the numbers it formats
itself (a mean, a count, a step) go as they are, a negative one included: a float we format is
digits, a sign and a point, never an expression, and quoting it would make it text.
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet (Excel, LibreOffice, Google Sheets) reads as the start of a formula."""


def spreadsheet_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: a leading apostrophe before a formula's first character.

    The OWASP rule: the apostrophe tells the spreadsheet "text", and it is not shown. Applied to
    names even when they look like a number (a model named ``-2`` is written ``'-2``): a name is
    never a number we computed.
    """
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def markdown_text(text: str) -> str:
    """A Markdown table cell that renders as the text it is: ``\\``, ``|``, ``&``, ``<`` and ``>`` escaped.

    ``&`` first, so an entity in the text (``&lt;``) shows as written instead of as ``<``.
    """
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("&", "&amp;")
            .replace("<", "&lt;").replace(">", "&gt;"))
