"""The hand-written SVG plots: well-formed, one mark per value, escaped labels."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fasteval.view import plots

NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_grouped_bars_draw_one_bar_per_present_value() -> None:
    svg = plots.grouped_bars("t", ["a", "b", "c"], [("m1", [0.5, None, 1.0]), ("m2 <x>", [0.0, 0.25, 0.75])],
                             pct=True)
    root = _parse(svg)
    bars = [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]
    assert len(bars) == 5
    heights = sorted(float(b.get("height", "0")) for b in bars)
    assert heights[0] == 0.0 and heights[-1] == 180.0  # 100% fills the plot
    assert "m2 <x>" in "".join(t.text or "" for t in root.iter(f"{NS}text"))


def test_stacked_bars_split_each_row_by_its_counts() -> None:
    root = _parse(plots.stacked_hbars("t", [("r1", {"ok": 3, "err": 1}), ("r2", {"ok": 2})]))
    bars = [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]
    widths = [float(b.get("width", "0")) for b in bars]
    assert len(bars) == 3 and widths[0] == 3 * widths[1] and widths[2] == widths[0] + widths[1]


def test_strip_plot_has_a_dot_per_seed() -> None:
    root = _parse(plots.strip_plot("t", [("a", [0.1, 0.2, 0.3]), ("b", [1.0]), ("empty", [])]))
    assert len([c for c in root.iter(f"{NS}circle")]) == 4


def test_nothing_to_plot_is_said_not_drawn_blank() -> None:
    for svg in (plots.grouped_bars("t", [], []), plots.stacked_hbars("t", []), plots.strip_plot("t", [])):
        assert "nothing to plot" in svg
        _parse(svg)
