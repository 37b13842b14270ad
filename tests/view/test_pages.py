"""Page templates: suites' own tables, escaping, value tables."""

from __future__ import annotations

import re

from fasteval.view.pages import summary_body, value_table


def _run(metrics: dict[str, object]) -> dict[str, object]:
    row = {"model": "m<1>", "suite": "vistahop", "setting": "main", "mean": 0.5, "std": 0.1, "ci95": [0.4, 0.6],
           "n_seeds": 3, "n_ok": 9, "n_error": 1, "pass_at_k": 0.7, "pass_pow_k": 0.3, "seed_means": [0.4, 0.5, 0.6],
           "terminations": {"answered": 9, "error": 1}, "errors": {"timeout": 1}, "by_task_type": {},
           "suite_metrics": metrics}
    return {"name": "r", "path": "/x", "rows": [row], "by_status": {"ok": 9, "error": 1}, "planned": 10,
            "stats": {"tool_calls": {"m / vistahop / main": {"0": 4, "2": 6}}, "rounds": {},
                      "tool_mix": {"m / vistahop / main": {"search": 8, "zoom": 4}}}}


def test_suite_tables_render_scalars_dicts_and_nested_rows() -> None:
    metrics = {"pass_at_1": 41.5, "levels": {"L1": {"pass_at_1": 60.0, "std": 2.0}, "L2": {"pass_at_1": 20.0}},
               "termination": {"answered": 8, "max_rounds": 2}, "calls_by_tool": {"search": 8}}
    html = summary_body({"runs": [_run(metrics)]})
    assert "<h3>vistahop: m&lt;1&gt; / main</h3>" in html and "m<1>" not in html
    assert re.search(r"<h4>levels</h4><table><tr><th>levels</th><th[^>]*>pass_at_1</th><th[^>]*>std</th>", html)
    assert re.search(r"<td>L2</td><td[^>]*>20</td><td[^>]*></td>", html)
    assert "<th>pass_at_1</th><td>41.5</td>" in html
    assert html.count('<svg class="plot"') == 6  # no task types: no per-category plot


def test_image_tokens_per_trajectory_show_where_the_server_counted_them() -> None:
    run = _run({})
    html = summary_body({"runs": [run]})
    assert "<th class=\"num\">image tok/traj</th>" in html and '<td class="num image_tokens">-</td>' in html
    run["rows"][0]["image_tokens_per_trajectory"] = 258.75  # type: ignore[index]
    assert '<td class="num image_tokens">259</td>' in summary_body({"runs": [run]})


def test_value_table_turns_lists_of_objects_into_tables() -> None:
    html = value_table({"rubric": [{"item": "names the tool", "weight": 2, "verdict": True},
                                   {"item": "<b>", "weight": 1, "verdict": False}], "nested": {"a": [1, 2]}})
    assert "<th>item</th><th>weight</th><th>verdict</th>" in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert "<pre>" in html  # a dict holding a list is shown as JSON


def test_the_control_trace_is_shown_escaped() -> None:
    from fasteval.view.pages import control_html

    html = control_html([{"at": "2026-01-01T03:00:00+00:00", "who": "ann (uid 1000, pid 7)",
                          "command": "set --model <script>x</script> rpm=30",
                          "changes": [{"what": "<b>m</b>.rpm", "old": None, "new": 30.0}]}])
    assert "Steered while it ran (1 changes)" in html and "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "None → 30.0" in html
    assert control_html([]) == ""
