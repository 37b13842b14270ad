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
