"""``fasteval report RUN --html``: one self-contained file with the report's numbers."""

from __future__ import annotations

import re
from pathlib import Path

from fasteval.view.html_report import render_report
from fasteval.view.report import report
from tests.view.sweep_fixture import run_cli


def test_html_report_is_self_contained_with_the_report_numbers(demo_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run_cli("report", str(demo_run), "--html", str(out), "--examples", "1")
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script src" not in html and "/blob/" not in html
    for row in report(demo_run)["rows"]:
        m = re.search(rf'data-model="{row["model"]}" data-suite="tir-synth" data-setting="{row["setting"]}">'
                      r'.*?<span class="mean">([^<]*)</span> ± <span class="std">([^<]*)</span>', html)
        assert m is not None
        assert m.groups() == (f"{100 * row['mean']:.1f}", f"{100 * row['std']:.1f}")
    assert html.count('<svg class="plot"') >= 6
    # One example per model, images inline as data URIs.
    assert html.count('<section class="example">') == 3
    assert re.search(r'<img class="thumb"[^>]* src="data:image/png;base64,', html)


def test_examples_stop_embedding_images_at_the_cap(demo_run: Path) -> None:
    html = render_report(demo_run, examples=2, image_budget=1)
    assert "data:image" not in html
    assert "left out: over the size cap" in html and "left out over the" in html


def test_report_html_of_a_non_run_folder_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("report", str(tmp_path), "--html", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "not a run folder" in proc.stderr
    assert not (tmp_path / "x.html").exists()
