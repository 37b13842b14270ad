"""``fasteval report RUN --leaderboard``: one row per model, one column per suite, papers' numbers beside ours."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from fasteval.cli.common import console, print_error, print_json
from fasteval.core.errors import BadInput, UsageError
from fasteval.core.exitcodes import EXIT_OK, exit_code_for
from fasteval.core.terminal import plain
from fasteval.runfolder.records import read_manifest
from fasteval.suites.published import PublishedScore, all_scores, published_score
from fasteval.view.leaderboard import (
    cell_lines,
    completion_line,
    csv_text,
    leaderboard,
    markdown,
    partial_jobs,
    pct,
    sort_choices,
)
from fasteval.view.report import report


def published_file(path: Path) -> list[PublishedScore]:
    """Numbers from a YAML list (the fields of a config's ``published:``), read with the config's bounds.

    For numbers added after a run started: putting them into the run's config would change its hash.
    """
    from fasteval.config.yaml_read import read_yaml

    data, _ = read_yaml(path)
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a list of published numbers (suite, setting, model, match, value, "
                       "paper, table)")
    out = []
    for entry in data:
        if not isinstance(entry, dict):
            raise BadInput(f"{path}: expected a mapping per published number, got {entry!r}")
        out.append(published_score(entry, "file"))
    return out


def print_leaderboard(run_dir: Path, fmt: str, sort: str, extra: Path | None = None) -> int:
    """Print the leaderboard of ``run_dir`` as a table, JSON, CSV or Markdown."""
    config = (read_manifest(run_dir) or {}).get("config") or {}
    try:
        published = [*(published_file(extra) if extra else []), *all_scores(config)]
        board = leaderboard(report(run_dir, per_task=False), config, sort=sort, published=published)
    except UsageError as e:  # ours (a bad --sort, a published file); a bug is an internal error (cli/main.py)
        print_error(e)
        return exit_code_for(e)
    return _print_board(board, str(run_dir), fmt, sort)


def print_store_leaderboard(store: Path, fmt: str, sort: str, extra: Path | None = None) -> int:
    """The leaderboard across runs: every model the results store holds, each cell from its own records."""
    from fasteval.view.store_report import store_report

    try:
        published = [*(published_file(extra) if extra else []), *all_scores({})]
        board = leaderboard(store_report(store), {}, sort=sort, published=published)
    except UsageError as e:  # a bad --sort, a published file, a folder that is not a store
        print_error(e)
        return exit_code_for(e)
    board["store"] = str(store)
    return _print_board(board, f"{store} (every run)", fmt, sort)


def _print_board(board: dict[str, Any], title: str, fmt: str, sort: str) -> int:
    if fmt == "json":
        print_json(board)
    elif fmt == "csv":
        sys.stdout.write(csv_text(board))
    elif fmt == "markdown":
        sys.stdout.write(markdown(board))
    else:
        if line := completion_line(board):
            console().print(plain(line, style="bold yellow"))
        t = Table(title=plain(f"{title}: leaderboard, score (%) mean ± std over seeds"), show_lines=True)
        t.add_column("model")
        for c in board["columns"]:
            t.add_column(plain(c["label"]), justify="right")
        t.add_column("average", justify="right")
        for r in board["rows"]:
            avg = pct(r["average"]) + ("" if r["complete"] else f" ({r['n_columns']}/{len(board['columns'])})")
            t.add_row(plain(r["model"] + partial_jobs(r)), *(plain("\n".join(cell_lines(r["cells"].get(c["key"]))), block=True)
                                           for c in board["columns"]), avg)
        t.caption = plain(f"sorted by {sort} (one of: {', '.join(sort_choices(board))}); fixed/ref: both scorers "
                          "where the suite has two; paper: published numbers, sources in --format json")
        console().print(t)
    return EXIT_OK
