""".xlsx prediction files (VLMEvalKit's default PRED_FORMAT), written by the two engines pandas'
``to_excel`` uses, read by our standard-library reader; openpyxl reading the same file is the oracle."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import releases as rel
import xlsxwriter
from openpyxl.cell.rich_text import CellRichText, TextBlock
from openpyxl.cell.text import InlineFont

from fasteval.suites.mcq.prediction_file import read_predictions
from fasteval.suites.mcq.xlsx import XlsxError, xlsx_rows

if "twi_e2e_support" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "twi_e2e_support", Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py")
    assert _spec is not None and _spec.loader is not None
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["twi_e2e_support"] = _mod
    _spec.loader.exec_module(_mod)
support = sys.modules["twi_e2e_support"]

HEADER = ["index", "question", "A", "B", "C", "D", "answer", "category", "cycle_category", "prediction"]


def _hr_rows() -> list[list[Any]]:
    rows = []
    for r in rel.hrbench_rows():
        pred: Any = f"**{r['answer']}**"
        if r["index"] == 4:
            pred = "no idea"
        elif r["index"] == 6:
            pred = None  # an empty cell: NaN for pandas, 'nan' for VLMEvalKit's str()
        rows.append([r["index"], *(r[k] for k in HEADER[1:-1]), pred])
    return rows


def _openpyxl(path: Path, rows: list[list[Any]]) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.append(HEADER)
    for row in rows:
        ws.append(row)
    wb.save(path)
    return path


def _xlsxwriter(path: Path, rows: list[list[Any]]) -> Path:
    """As VLMEvalKit's ``dump_xlsx`` writes (pandas' ExcelWriter, engine xlsxwriter, strings_to_formulas off)."""
    wb = xlsxwriter.Workbook(str(path), {"strings_to_formulas": False})
    ws = wb.add_worksheet()
    ws.write_row(0, 0, HEADER)
    for n, row in enumerate(rows, start=1):
        for c, v in enumerate(row):
            if v is not None:
                ws.write(n, c, v)
    wb.close()
    return path


def _oracle(path: Path) -> list[dict[str, Any]]:
    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    it = wb.active.iter_rows(values_only=True)  # type: ignore[union-attr]
    header = [str(h) for h in next(it)]
    return [dict(zip(header, r, strict=False)) for r in it]


@pytest.mark.parametrize("writer", [_openpyxl, _xlsxwriter], ids=["openpyxl-inline", "xlsxwriter-shared"])
def test_rows_read_as_openpyxl_reads_them(tmp_path: Path, writer: Any) -> None:
    rows = _hr_rows()
    rows[0][1] = "Ünïcode, \"quotes\" & <tags>\nsecond line"
    rows[1][-1] = 2.5
    rows[2][-1] = True
    rows[3][-1] = "=B, the first one"  # a string, not a formula, as VLMEvalKit writes it
    rows[5][-1] = "B, see https://example.com/bus"  # XlsxWriter turns URLs into hyperlinks
    path = writer(tmp_path / "m_HRBench4K.xlsx", rows)
    ours = xlsx_rows(path)
    assert ours == _oracle(path)
    assert ours[0]["index"] == 0 and isinstance(ours[0]["index"], int) and ours[6]["prediction"] is None
    assert (ours[1]["prediction"], ours[2]["prediction"]) == (2.5, True)
    assert ours[5]["prediction"] == "B, see https://example.com/bus"
    # openpyxl stores "=..." as a formula with no cached value (None for both readers); XlsxWriter as text
    assert ours[3]["prediction"] == ("=B, the first one" if writer is _xlsxwriter else None)
    preds = read_predictions(path)
    assert preds[6]["was_empty"] and not preds[4]["was_empty"] and preds[1]["prediction"] == "2.5"


def test_rich_text_runs_and_cells_without_references(tmp_path: Path) -> None:
    wb = xlsxwriter.Workbook(str(tmp_path / "x.xlsx"))
    ws = wb.add_worksheet()
    bold = wb.add_format({"bold": True})
    ws.write_row(0, 0, ["index", "prediction", "note"])
    ws.write(1, 0, 0)
    ws.write_rich_string(1, 1, "The answer is ", bold, "B")
    ws.write(2, 0, 1)
    ws.write(2, 2, "gap before me")
    wb.close()
    assert xlsx_rows(tmp_path / "x.xlsx") == [{"index": 0, "prediction": "The answer is B", "note": None},
                                             {"index": 1, "prediction": None, "note": "gap before me"}]
    wb2 = openpyxl.Workbook()
    ws2 = wb2.active
    assert ws2 is not None
    ws2.append(["index", "prediction"])
    ws2.append([0, CellRichText(["<answer>", TextBlock(InlineFont(b=True), "C"), "</answer>"])])
    wb2.save(tmp_path / "o.xlsx")
    assert xlsx_rows(tmp_path / "o.xlsx") == [{"index": 0, "prediction": "<answer>C</answer>"}]


def test_score_file_on_xlsx_matches_the_tsv_and_needs_no_openpyxl(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _hr_rows()
    xlsx = _openpyxl(tmp_path / "m_HRBench4K.xlsx", rows)
    tsv = rel.write_tsv(tmp_path / "m_HRBench4K.tsv",
                        [dict(zip(HEADER, ["" if v is None else v for v in r], strict=True)) for r in rows])
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # a plain install: importing it would fail
    outs = []
    for path in (xlsx, tsv):
        code, out, err = support.cli(capsys, "score-file", "--suite", "hrbench", "--fidelity", "reference",
                                     "--format", "json", str(path))
        assert code == 0, err
        outs.append(json.loads(out))
    assert outs[0] == outs[1]
    assert outs[0]["items"]["6"] == 0.0 and outs[0]["overall"] == pytest.approx(6 / 8)


def test_a_bomb_or_a_broken_file_is_one_clear_error(tmp_path: Path) -> None:
    path = _xlsxwriter(tmp_path / "big.xlsx", [[i, "q", "a", "b", "c", "d", "A", "single", "c1", "x" * 200]
                                               for i in range(500)])
    assert len(xlsx_rows(path)) == 500
    with pytest.raises(XlsxError, match=r"big\.xlsx: xl/\w+(/\w+)?\.xml expands past 20,000 bytes"):
        xlsx_rows(path, limit=20_000)
    (tmp_path / "not.xlsx").write_text("index\tprediction\n0\tA\n")
    with pytest.raises(XlsxError, match=r"not\.xlsx: not a readable xlsx file"):
        read_predictions(tmp_path / "not.xlsx")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("xl/workbook.xml", "<workbook><sheets><sheet r:id='x'")
    (tmp_path / "torn.xlsx").write_bytes(buf.getvalue())
    with pytest.raises(XlsxError, match=r"torn\.xlsx: xl/workbook\.xml is not well-formed XML"):
        xlsx_rows(tmp_path / "torn.xlsx")


def _raw_xlsx(path: Path, rows_xml: str, *, strings: list[str] | None = None, active: str = "0") -> Path:
    """A minimal workbook whose sheet XML we write by hand (what no spreadsheet program would)."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("xl/workbook.xml", f'<workbook {ns} {rel}><bookViews><workbookView activeTab="{active}"/>'
                                       f'</bookViews><sheets><sheet name="s" sheetId="1" r:id="rId1"/></sheets></workbook>')
        zf.writestr("xl/_rels/workbook.xml.rels", '<Relationships><Relationship Id="rId1" '
                                                   'Target="worksheets/sheet1.xml"/></Relationships>')
        zf.writestr("xl/worksheets/sheet1.xml", f"<worksheet {ns}><sheetData>{rows_xml}</sheetData></worksheet>")
        if strings is not None:
            zf.writestr("xl/sharedStrings.xml", f"<sst {ns}>" + "".join(f"<si><t>{s}</t></si>" for s in strings)
                        + "</sst>")
    return path


_HEAD = '<row><c r="A1" t="inlineStr"><is><t>index</t></is></c><c r="B1" t="inlineStr"><is><t>prediction</t></is></c></row>'


@pytest.mark.parametrize("column", ["ZZZZZ", "ABCDEFGHIJKLMNOPQRST"])
def test_a_column_past_xfd_is_one_clear_error_not_a_huge_row(tmp_path: Path, column: str) -> None:
    path = _raw_xlsx(tmp_path / "wide.xlsx", _HEAD + f'<row><c r="A2"><v>1</v></c><c r="{column}2"><v>2</v></c></row>')
    with pytest.raises(XlsxError, match=r"wide\.xlsx: cell .* past column XFD|wide\.xlsx: cell reference"):
        xlsx_rows(path)


def test_cells_far_right_of_the_header_cost_no_memory(tmp_path: Path) -> None:
    """Every row has a cell at XFD (the last column): only the header's two columns are kept."""
    import tracemalloc

    rows = "".join(f'<row><c r="A{n}"><v>{n}</v></c><c r="XFD{n}"><v>9</v></c></row>' for n in range(2, 202))
    path = _raw_xlsx(tmp_path / "far.xlsx", _HEAD + rows)
    tracemalloc.start()
    try:
        got = xlsx_rows(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(got) == 200 and got[0] == {"index": 2, "prediction": None}
    assert peak < 8 << 20  # 200 rows x 16,384 columns would be 26 MB of list slots alone


def test_rows_are_read_one_at_a_time_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc

    from fasteval.suites.mcq import xlsx

    path = _raw_xlsx(tmp_path / "long.xlsx", _HEAD + "<row/>" * 100_000 + '<row><c r="A9"><v>7</v></c></row>')
    tracemalloc.start()
    try:
        assert xlsx_rows(path) == [{"index": 7, "prediction": None}]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # 100,000 row elements kept in the tree would be ~10 MB
    monkeypatch.setattr(xlsx, "MAX_ROWS", 50_000)
    with pytest.raises(XlsxError, match=r"long\.xlsx: the sheet has more than 50,000 rows"):
        xlsx_rows(path)
    monkeypatch.setattr(xlsx, "MAX_CELLS", 3)
    path = _raw_xlsx(tmp_path / "cells.xlsx", _HEAD + '<row><c r="A2"><v>1</v></c><c r="B2"><v>2</v></c></row>')
    with pytest.raises(XlsxError, match=r"cells\.xlsx: the sheet has more than 3 cells"):
        xlsx_rows(path)


def test_a_bad_active_tab_or_shared_string_index_names_the_file(tmp_path: Path) -> None:
    path = _raw_xlsx(tmp_path / "tab.xlsx", _HEAD, active="x")
    with pytest.raises(XlsxError, match=r"tab\.xlsx: xl/workbook\.xml: activeTab 'x' is not a sheet number"):
        xlsx_rows(path)
    row = '<row><c r="A2"><v>0</v></c><c r="B2" t="s"><v>-1</v></c></row>'
    path = _raw_xlsx(tmp_path / "neg.xlsx", _HEAD + row, strings=["first", "last"])
    with pytest.raises(XlsxError, match=r"neg\.xlsx: cell B2 names shared string '-1', of 2"):
        xlsx_rows(path)
    ok = _raw_xlsx(tmp_path / "ok.xlsx", _HEAD + row.replace("-1", "1"), strings=["first", "last"])
    assert xlsx_rows(ok) == [{"index": 0, "prediction": "last"}]
