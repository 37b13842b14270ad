"""Rows of an .xlsx prediction file, read with the standard library (zipfile + ElementTree).

VLMEvalKit writes its predictions as xlsx by default (``PRED_FORMAT``; ``dump_xlsx``: pandas with
the XlsxWriter engine, shared strings), so most published runs a user rescores with ``score-file``
are xlsx. We read them without a third-party library on
purpose: a user who points ``score-file`` at VLMEvalKit's output expects it to work in a plain
install, not to learn about an extra, and the sheets pandas / openpyxl write for a DataFrame use
a small, stable part of SpreadsheetML: one worksheet, a header row, cells that are shared
strings, inline strings, formula strings, numbers, booleans or error codes. That part is read
here, streaming, with the file treated as untrusted: every archive member is read through a byte
cap shared by all members (a small file cannot expand into gigabytes), ElementTree resolves no
external entities, expat (2.4+) refuses entity-amplification bombs, and rows and cells are read
and dropped one at a time, counted against ``MAX_ROWS`` and ``MAX_CELLS``, with no column past
Excel's last (XFD): an 1,100-byte file of cells at column ``ZZZZZ`` cannot become a gigabyte of
empty slots. Styles are not read, so a date cell comes back
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
"""The most the archive's members we read may expand to, together (VLMEvalKit's largest sheets
are tens of MB)."""
MAX_COLUMNS = 16_384
"""Excel's own last column (XFD): a reference past it (``ZZZZZ``) is not a spreadsheet's."""
MAX_ROWS = 500_000
"""Row elements of a sheet (prediction files have tens of thousands; each row costs memory)."""
MAX_CELLS = 5_000_000
"""Cells of a sheet and strings of its shared-string table (rows x header width are kept)."""
MAX_CHILDREN = 100_000
"""Child elements one XML element may hold before we read it (rows and cells are read and
dropped one by one, so only something that is no sheet gets here)."""
MAX_DEPTH = 64
_CELL_REF = re.compile(r"([A-Z]{1,3})(\d*)$")
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


class XlsxError(ValueError):
    """The file is not an xlsx workbook we can read; the message says why."""


class _Capped:
    """A read-only stream that fails once more than ``budget[0]`` bytes came through all the
    members sharing the budget (a small file cannot expand into gigabytes, member by member)."""

    def __init__(self, raw: IO[bytes], name: str, budget: list[int]) -> None:
        self.raw, self.name, self.budget = raw, name, budget

    def read(self, n: int = -1) -> bytes:
        left = self.budget[1] - self.budget[0]
        chunk = self.raw.read(n if n is not None and n >= 0 else left + 1)
        self.budget[0] += len(chunk)
        if self.budget[0] > self.budget[1]:
            raise XlsxError(f"{self.name} expands past {self.budget[1]:,} bytes (a zip bomb, or not a prediction file)")
        return chunk


def _local(tag: str) -> str:
    """An element's name without its namespace (transitional and strict OOXML alike)."""
    return tag.rsplit("}", 1)[-1]


def _events(zf: zipfile.ZipFile, member: str, budget: list[int],
            detach: frozenset[str] = frozenset()) -> Iterator[ET.Element]:
    """Elements of ``member`` as they close. One named in ``detach`` is taken off its parent once
    the caller has read it, so a sheet of a million rows never holds more than one in memory;
    an element nested too deeply or with too many children is refused before it grows."""
    try:
        raw = zf.open(member)
    except KeyError:
        raise XlsxError(f"the workbook has no {member}") from None
    stack: list[ET.Element] = []
    with raw:
        try:
            for event, elem in ET.iterparse(_Capped(raw, member, budget), events=("start", "end")):
                if event == "start":
                    if len(stack) >= MAX_DEPTH:
                        raise XlsxError(f"{member} nests elements more than {MAX_DEPTH} deep")
                    if stack and len(stack[-1]) > MAX_CHILDREN:
                        raise XlsxError(f"{member}: a <{_local(stack[-1].tag)[:40]}> holds more than "
                                        f"{MAX_CHILDREN:,} elements")
                    stack.append(elem)
                    continue
                stack.pop()
                yield elem
                if stack and _local(elem.tag) in detach:
                    stack[-1].remove(elem)
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


def _shared_strings(zf: zipfile.ZipFile, budget: list[int]) -> list[str]:
    if "xl/sharedStrings.xml" not in zf.namelist():
        return []
    strings: list[str] = []
    for elem in _events(zf, "xl/sharedStrings.xml", budget, frozenset({"si"})):
        if _local(elem.tag) == "si":
            if len(strings) >= MAX_CELLS:
                raise XlsxError(f"xl/sharedStrings.xml holds more than {MAX_CELLS:,} strings")
            strings.append(_text(elem))
    return strings


def _first_sheet(zf: zipfile.ZipFile, budget: list[int]) -> str:
    """The active worksheet's member name (the first one when the workbook names none)."""
    sheets: list[str] = []
    active = 0
    for elem in _events(zf, "xl/workbook.xml", budget, frozenset({"sheet"})):
        name = _local(elem.tag)
        if name == "sheet":
            sheets.append(elem.get(f"{{{_REL_NS}}}id") or elem.get("id") or "")
        elif name == "workbookView":
            tab = elem.get("activeTab") or "0"
            if not (tab.isascii() and tab.isdigit() and len(tab) < 10):
                raise XlsxError(f"xl/workbook.xml: activeTab {tab[:20]!r} is not a sheet number")
            active = int(tab)
    if not sheets:
        raise XlsxError("the workbook lists no worksheet")
    rel_id = sheets[active] if active < len(sheets) else sheets[0]
    for elem in _events(zf, "xl/_rels/workbook.xml.rels", budget, frozenset({"Relationship"})):
        if _local(elem.tag) == "Relationship" and elem.get("Id") == rel_id:
            target = elem.get("Target") or ""
            return target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
    raise XlsxError(f"the workbook's relationships do not name its worksheet {rel_id!r}")


def _column(ref: str | None, fallback: int) -> int:
    """0-based column of a cell reference ("C7" -> 2); ``fallback`` when the cell has none."""
    m = _CELL_REF.match(ref or "")
    if m is None:
        if ref and ref[:1].isalpha():
            raise XlsxError(f"cell reference {ref[:24]!r} is not a spreadsheet cell (at most column XFD)")
        return fallback
    col = 0
    for ch in m.group(1):
        col = col * 26 + ord(ch) - 64
    if col > MAX_COLUMNS:
        raise XlsxError(f"cell {(ref or '')[:24]!r} is past column XFD, the last a spreadsheet has")
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
        index = v.text.strip()
        if index.isascii() and index.isdigit() and int(index) < len(strings):
            return strings[int(index)]
        raise XlsxError(f"cell {cell.get('r', '?')[:24]} names shared string {v.text[:20]!r}, of {len(strings)}")
    if kind == "b":
        return v.text.strip() == "1"
    if kind in ("str", "e"):
        return v.text
    try:
        return _number(v.text)
    except ValueError:
        raise XlsxError(f"cell {cell.get('r', '?')[:24]} holds {v.text[:20]!r}, not a number") from None


class _Sheet:
    """Rows read cell by cell: the header row fixes the width, and a later row keeps only the
    columns the header has (as the dicts we return would), so a cell at column XFD in every
    row costs nothing; rows, cells and kept values are counted against the bounds above."""

    def __init__(self, strings: list[str]) -> None:
        self.strings = strings
        self.header: list[Any] | None = None
        self.rows: list[list[Any]] = []
        self.values: list[Any] = []
        self.any_value = False
        self.n_rows = self.n_cells = 0

    def cell(self, cell: ET.Element) -> None:
        self.n_cells += 1
        if self.n_cells > MAX_CELLS:
            raise XlsxError(f"the sheet has more than {MAX_CELLS:,} cells")
        col = _column(cell.get("r"), len(self.values))
        value = _cell_value(cell, self.strings)
        self.any_value = self.any_value or value is not None
        if col < len(self.values) or (self.header is not None and col >= len(self.header)):
            return
        self.values.extend([None] * (col - len(self.values)))
        self.values.append(value)

    def row_end(self) -> None:
        self.n_rows += 1
        if self.n_rows > MAX_ROWS:
            raise XlsxError(f"the sheet has more than {MAX_ROWS:,} rows")
        if self.any_value:
            if self.header is None:
                self.header = self.values
            else:
                self.rows.append(self.values)
                if len(self.rows) * len(self.header) > MAX_CELLS:
                    raise XlsxError(f"the sheet holds more than {MAX_CELLS:,} cells under its header")
        self.values, self.any_value = [], False


def xlsx_rows(path: Path, *, limit: int = MAX_MEMBER_BYTES) -> list[dict[str, Any]]:
    """The active sheet's rows as dicts keyed by the header row (a missing cell is None; rows with
    no value at all are skipped, as pandas' ``read_excel`` skips blank lines)."""
    budget = [0, limit]
    try:
        with zipfile.ZipFile(path) as zf:
            sheet = _Sheet(_shared_strings(zf, budget))
            for elem in _events(zf, _first_sheet(zf, budget), budget, frozenset({"c", "row"})):
                name = _local(elem.tag)
                if name == "c":
                    sheet.cell(elem)
                elif name == "row":
                    sheet.row_end()
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise XlsxError(f"{path}: not a readable xlsx file ({e})") from None
    except XlsxError as e:
        raise XlsxError(f"{path}: {e}") from None
    if sheet.header is None:
        return []
    header = [str(h) if h is not None else f"Unnamed: {i}" for i, h in enumerate(sheet.header)]
    return [dict(zip(header, r + [None] * (len(header) - len(r)), strict=False)) for r in sheet.rows]
