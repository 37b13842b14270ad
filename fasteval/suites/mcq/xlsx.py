"""Rows of an .xlsx prediction file, read with the standard library (zipfile + ElementTree).

VLMEvalKit writes its predictions as xlsx by default (``PRED_FORMAT``; ``dump_xlsx``: pandas with
the XlsxWriter engine, shared strings), so most published runs a user rescores with ``score-file``
are xlsx. We read them without a third-party library on
purpose: a user who points ``score-file`` at VLMEvalKit's output expects it to work in a plain
install, not to learn about an extra, and the sheets pandas / openpyxl write for a DataFrame use
a small, stable part of SpreadsheetML: one worksheet, a header row, cells that are shared
strings, inline strings, formula strings, numbers, booleans or error codes. That part is read
here, streaming, with the file treated as untrusted: every archive member is read through a byte
cap (a small file cannot expand into gigabytes), ElementTree resolves no external entities, and
expat (2.4+) refuses entity-amplification bombs. Styles are not read, so a date cell comes back
as its serial number (prediction files hold none).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from xml.etree import ElementTree as ET

MAX_MEMBER_BYTES = 1 << 30
"""The most one archive member may expand to (VLMEvalKit's largest sheets are tens of MB)."""
_CELL_REF = re.compile(r"([A-Z]+)(\d*)$")
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


class XlsxError(ValueError):
    """The file is not an xlsx workbook we can read; the message says why."""


class _Capped:
    """A read-only stream that fails once more than ``limit`` bytes came through."""

    def __init__(self, raw: IO[bytes], name: str, limit: int) -> None:
        self.raw, self.name, self.limit, self.seen = raw, name, limit, 0

    def read(self, n: int = -1) -> bytes:
        chunk = self.raw.read(n if n is not None and n >= 0 else self.limit + 1 - self.seen)
        self.seen += len(chunk)
        if self.seen > self.limit:
            raise XlsxError(f"{self.name} expands past {self.limit:,} bytes (a zip bomb, or not a prediction file)")
        return chunk


def _local(tag: str) -> str:
    """An element's name without its namespace (transitional and strict OOXML alike)."""
    return tag.rsplit("}", 1)[-1]


def _events(zf: zipfile.ZipFile, member: str, limit: int) -> Iterator[ET.Element]:
    """Elements of ``member`` as they close (cleared by the caller once read)."""
    try:
        raw = zf.open(member)
    except KeyError:
        raise XlsxError(f"the workbook has no {member}") from None
    with raw:
        try:
            for _, elem in ET.iterparse(_Capped(raw, member, limit), events=("end",)):
                yield elem
        except ET.ParseError as e:
            raise XlsxError(f"{member} is not well-formed XML ({e})") from None


def _text(elem: ET.Element) -> str:
    """The text of a string item: its ``t`` runs joined, phonetic (``rPh``) runs left out."""
    out: list[str] = []

    def walk(node: ET.Element) -> None:
        for child in node:
            name = _local(child.tag)
            if name == "rPh":
                continue
            if name == "t":
                out.append(child.text or "")
            else:
                walk(child)

    walk(elem)
    return "".join(out)


def _shared_strings(zf: zipfile.ZipFile, limit: int) -> list[str]:
    if "xl/sharedStrings.xml" not in zf.namelist():
        return []
    strings: list[str] = []
    for elem in _events(zf, "xl/sharedStrings.xml", limit):
        if _local(elem.tag) == "si":
            strings.append(_text(elem))
            elem.clear()
    return strings


def _first_sheet(zf: zipfile.ZipFile, limit: int) -> str:
    """The active worksheet's member name (the first one when the workbook names none)."""
    sheets: list[str] = []
    active = 0
    for elem in _events(zf, "xl/workbook.xml", limit):
        name = _local(elem.tag)
        if name == "sheet":
            sheets.append(elem.get(f"{{{_REL_NS}}}id") or elem.get("id") or "")
        elif name == "workbookView":
            active = int(elem.get("activeTab") or 0)
    if not sheets:
        raise XlsxError("the workbook lists no worksheet")
    rel_id = sheets[active] if active < len(sheets) else sheets[0]
    for elem in _events(zf, "xl/_rels/workbook.xml.rels", limit):
        if _local(elem.tag) == "Relationship" and elem.get("Id") == rel_id:
            target = elem.get("Target") or ""
            return target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
    raise XlsxError(f"the workbook's relationships do not name its worksheet {rel_id!r}")


def _column(ref: str | None, fallback: int) -> int:
    """0-based column of a cell reference ("C7" -> 2); ``fallback`` when the cell has none."""
    m = _CELL_REF.match(ref or "")
    if m is None:
        return fallback
    col = 0
    for ch in m.group(1):
        col = col * 26 + ord(ch) - 64
    return col - 1


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _cell_value(cell: ET.Element, strings: list[str]) -> Any:
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        inline = next((c for c in cell if _local(c.tag) == "is"), None)
        return _text(inline) if inline is not None else ""
    v = next((c for c in cell if _local(c.tag) == "v"), None)
    if v is None or v.text is None:
        return None
    if kind == "s":
        try:
            return strings[int(v.text)]
        except (ValueError, IndexError):
            raise XlsxError(f"cell {cell.get('r', '?')} names shared string {v.text[:20]!r}, "
                            f"of {len(strings)}") from None
    if kind == "b":
        return v.text.strip() == "1"
    if kind in ("str", "e"):
        return v.text
    try:
        return _number(v.text)
    except ValueError:
        raise XlsxError(f"cell {cell.get('r', '?')} holds {v.text[:20]!r}, not a number") from None


def xlsx_rows(path: Path, *, limit: int = MAX_MEMBER_BYTES) -> list[dict[str, Any]]:
    """The active sheet's rows as dicts keyed by the header row (a missing cell is None; rows with
    no value at all are skipped, as pandas' ``read_excel`` skips blank lines)."""
    try:
        with zipfile.ZipFile(path) as zf:
            strings = _shared_strings(zf, limit)
            rows: list[list[Any]] = []
            for elem in _events(zf, _first_sheet(zf, limit), limit):
                if _local(elem.tag) != "row":
                    continue
                values: list[Any] = []
                for cell in (c for c in elem if _local(c.tag) == "c"):
                    col = _column(cell.get("r"), len(values))
                    values.extend([None] * (col - len(values)))
                    if col == len(values):
                        values.append(_cell_value(cell, strings))
                elem.clear()
                if any(v is not None for v in values):
                    rows.append(values)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise XlsxError(f"{path}: not a readable xlsx file ({e})") from None
    except XlsxError as e:
        raise XlsxError(f"{path}: {e}") from None
    if not rows:
        return []
    header = [str(h) if h is not None else f"Unnamed: {i}" for i, h in enumerate(rows[0])]
    return [dict(zip(header, r + [None] * (len(header) - len(r)), strict=False)) for r in rows[1:]]
