"""The viewer and the static report in a real headless Chromium (Debian's), driven by Playwright.

Skipped with the reason when Chromium or Playwright is missing; ``make test-browser`` sets
FASTEVAL_REQUIRE_BROWSER=1 so that a missing browser fails instead of skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fasteval.view.report import report
from tests.view.sweep_fixture import run_cli

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    path = os.environ.get("FASTEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    reason = None
    if path is None:
        reason = "no chromium on PATH (apt-get install chromium, or set FASTEVAL_CHROMIUM)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed (pip install -e '.[dev]')"
    if reason is not None:
        if os.environ.get("FASTEVAL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests required but {reason}")
        pytest.skip(reason)
    assert path is not None
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(str(profile), executable_path=executable, headless=True,
                                                    args=CHROMIUM_FLAGS)
        pg = ctx.new_page()
        pg.problems = []  # console errors and uncaught exceptions, checked by every test
        pg.on("console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
        yield pg
        ctx.close()


@pytest.fixture(scope="module")
def server(demo_run: Path) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "fasteval.cli.main", "view", str(demo_run), "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert m, line
    yield f"http://127.0.0.1:{m.group(1)}"
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _check_summary(page: Any, demo_run: Path) -> None:
    rows = report(demo_run)["rows"]
    assert page.locator("table.summary tr[data-model]").count() == len(rows)
    for r in rows:
        tr = page.locator(f'table.summary tr[data-model="{r["model"]}"][data-setting="{r["setting"]}"]')
        assert tr.locator(".mean").inner_text() == f"{100 * r['mean']:.1f}"
        assert tr.locator(".std").inner_text() == f"{100 * r['std']:.1f}"
        ci = r["ci95"]
        assert tr.locator(".ci").inner_text() == (f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "-")
        assert tr.locator(".n_ok").inner_text() == str(r["n_ok"])
        assert tr.locator(".n_error").inner_text() == str(r["n_error"])
        cost = r.get("cost_usd")
        assert tr.locator(".cost").inner_text() == ("-" if cost is None else f"{cost:.2f}")
    plots = page.locator("svg.plot")
    assert plots.count() >= 7
    for i in range(plots.count()):
        box = plots.nth(i).bounding_box()
        assert box is not None and box["width"] > 50 and box["height"] > 20
    marks = page.locator("svg.plot rect.bar, svg.plot circle.dot")
    assert marks.count() > 20
    assert any((marks.nth(i).bounding_box() or {}).get("height", 0) > 1 for i in range(marks.count()))


def test_summary_table_has_the_report_numbers_and_plots_render(page: Any, server: str, demo_run: Path) -> None:
    page.goto(server + "/")
    _check_summary(page, demo_run)
    assert page.problems == []


def test_job_page_shows_the_code_and_its_output_image_loads(page: Any, server: str) -> None:
    page.goto(server + "/jobs?model=sim-oracle&setting=tool&q=contrast")
    page.locator("table.jobs tr.job a").first.click()
    page.wait_for_load_state("load")
    assert "/job/" in page.url
    code = page.locator(".toolcall .code").first.inner_text()
    assert "np.clip" in code and "PROCESSED_IMAGE_SAVE_PATH" in code
    img = page.locator(".toolcall img.thumb").first
    img.scroll_into_view_if_needed()
    page.wait_for_function("el => el.complete && el.naturalWidth > 0", arg=img.element_handle(), timeout=10_000)
    assert img.evaluate("el => el.naturalWidth") > 0
    img.click()  # enlarges in the lightbox
    assert page.locator("dialog#lightbox[open] img").evaluate("el => el.src") == img.evaluate("el => el.src")
    assert page.problems == []


def test_filters_narrow_the_job_table(page: Any, server: str) -> None:
    page.goto(server + "/jobs")
    assert page.locator("#total").first.inner_text() == "96"
    with page.expect_navigation():
        page.select_option("select[name=status]", "error")
    assert page.locator("#total").first.inner_text() == "3"
    statuses = page.locator("table.jobs tr.job").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert statuses == ["error"] * 3
    page.goto(server + "/jobs")
    page.fill("input[name=q]", "maze")
    with page.expect_navigation():
        page.click("form.filters button")
    assert page.locator("#total").first.inner_text() == "12"
    tasks = page.locator("table.jobs tr.job td:first-child").all_inner_texts()
    assert tasks and all("maze" in t for t in tasks)
    assert page.problems == []


def test_compare_page_shows_every_model_and_seed(page: Any, server: str) -> None:
    page.goto(server + "/compare?task=tir-synth-0-contrast-000")
    assert page.locator(".grid .card").count() == 12
    for img in page.locator("img.thumb").all():
        img.scroll_into_view_if_needed()
        page.wait_for_function("el => el.complete", arg=img.element_handle(), timeout=10_000)
        assert img.evaluate("el => el.naturalWidth") > 0
    assert page.problems == []


def test_static_report_opens_from_a_file_url_with_the_same_numbers(page: Any, demo_run: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run_cli("report", str(demo_run), "--html", str(out), "--examples", "1")
    assert proc.returncode == 0, proc.stderr
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    _check_summary(page, demo_run)
    images = page.locator("img.thumb")
    assert images.count() > 0
    for img in images.all():
        img.scroll_into_view_if_needed()
        page.wait_for_function("el => el.complete", arg=img.element_handle(), timeout=10_000)
        assert img.evaluate("el => el.naturalWidth") > 0
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    assert page.problems == []
