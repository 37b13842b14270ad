"""The trajectory viewer (``fasteval view``), the static HTML report and ``fasteval show``.

Run-folder reading lives in ``fasteval.view.data``; pages render its dicts. A lazy face: ``fasteval
status`` reads through ``fasteval.view.report`` and must not import the viewer's pages and plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:  # ``name as name`` re-exports it, for the type checker
    from fasteval.view.data import JobQuery as JobQuery
    from fasteval.view.data import NotFound as NotFound
    from fasteval.view.data import RunSet as RunSet
    from fasteval.view.html_report import render_report as render_report
    from fasteval.view.html_report import write_report as write_report

__getattr__, __all__ = lazy_face("fasteval.view", {
    "data": ("JobQuery", "NotFound", "RunSet"),
    "html_report": ("render_report", "write_report"),
})
