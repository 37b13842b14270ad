"""The trajectory viewer (``fasteval view``), the static HTML report and ``fasteval show``.

Run-folder reading lives in ``fasteval.view.data``; pages render its dicts.
"""

from fasteval.view.data import JobQuery, NotFound, RunSet
from fasteval.view.html_report import render_report, write_report

__all__ = ["JobQuery", "NotFound", "RunSet", "render_report", "write_report"]
