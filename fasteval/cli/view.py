"""``fasteval view`` (the local web app) and ``fasteval show`` (one trajectory in the terminal).

Registered in ``fasteval.cli.main.COMMAND_MODULES``; ``report --html`` lives with ``report`` in the
main CLI and calls ``fasteval.view.html_report``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_error
from fasteval.core.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean, plain
from fasteval.view.data import NotFound, RunSet

if TYPE_CHECKING:
    from fasteval.view.access import Access


TOKEN_ENV = "FASTEVAL_VIEW_TOKEN"


def _access(a: argparse.Namespace) -> Access | str:
    """Who may read this viewer, or the reason not to start it.

    On a loopback address: loopback Host names (and --allow-host), a token only if $FASTEVAL_VIEW_TOKEN
    sets one. Anywhere else every trajectory is served to whoever reaches the port, so the user must
    say so (--remote) or set the token, and a token is always required (generated if not set).
    """
    from fasteval.view.access import LOOPBACK_NAMES, Access, is_loopback  # aiohttp: only for `view`

    token = os.environ.get(TOKEN_ENV) or None
    extra = frozenset(h.lower() for h in a.allow_host or [])
    if is_loopback(a.host):
        return Access(hosts=LOOPBACK_NAMES | extra, token=token)
    if not a.remote and token is None:
        return (f"--host {a.host} serves every trajectory to anyone who can reach the port; add --remote "
                f"(a token is generated and printed) or set ${TOKEN_ENV}, or keep 127.0.0.1 and use an SSH "
                "tunnel (docs/viewer.md)")
    return Access(hosts=extra or None, token=token or secrets.token_urlsafe(24))


def cmd_view(a: argparse.Namespace) -> int:
    import uvloop

    from fasteval.view.access import is_loopback
    from fasteval.view.app import serve

    access = _access(a)
    if isinstance(access, str):
        print(f"error: {clean(access)}", file=sys.stderr)
        return EXIT_USAGE
    if not is_loopback(a.host):
        print(clean(f"warning: serving on {a.host}, reachable from other machines; only requests with the "
                    "token are answered"), file=sys.stderr)
    try:
        RunSet([Path(p) for p in a.runs])  # fail fast, before binding a port
    except NotFound as e:
        print_error(e)
        return EXIT_USAGE
    try:
        uvloop.run(serve([Path(p) for p in a.runs], a.host, a.port, access))
    except OSError as e:
        print(f"error: cannot serve on {a.host}:{a.port}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def cmd_show(a: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from fasteval.view.show import ImageSaver, render_job

    try:
        runs = RunSet([Path(a.run)])
        run = next(iter(runs.runs))
        if a.job_id:
            job = runs.job(a.job_id, run)
        elif a.task:
            rows = runs.find_jobs(run, a.task, a.model, a.seed)
            if a.setting:
                rows = [r for r in rows if r["setting"] == a.setting]
            if not rows:
                raise NotFound(f"no job of task {a.task!r} matches in {a.run}")
            if len(rows) > 1:
                t = Table(title=plain(f"{len(rows)} jobs match: give a JOB_ID or narrow with --model/--setting/--seed"))
                for col in ("job_id", "model", "setting", "seed", "status", "score"):
                    t.add_column(col)
                for r in rows:
                    t.add_row(*(plain(r[c]) for c in ("job_id", "model", "setting", "seed", "status", "score")))
                Console(stderr=True).print(t)
                return EXIT_USAGE
            job = runs.job(rows[0]["job_id"], run)
        else:
            print("error: give a JOB_ID or --task", file=sys.stderr)
            return EXIT_USAGE
    except NotFound as e:
        print_error(e)
        return EXIT_USAGE
    job_id = "".join(c for c in str(job["record"]["job_id"])[:12] if c.isalnum())  # a folder name, not a path
    out = Path(a.images) if a.images else Path(tempfile.mkdtemp(prefix=f"fasteval-show-{job_id}-"))
    console = Console() if sys.stdout.isatty() else Console(width=120)
    render_job(console, job, ImageSaver(runs, run, out))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    v = sub.add_parser("view", help=HELP["view"])
    v.add_argument("runs", nargs="+", metavar="RUN")
    v.add_argument("--host", default="127.0.0.1", help="bind address; anything but loopback needs --remote")
    v.add_argument("--remote", action="store_true",
                   help=f"allow a non-loopback --host; every request then needs a token (${TOKEN_ENV}, or "
                        "one generated and printed)")
    v.add_argument("--allow-host", action="append", metavar="NAME",
                   help="also answer to this Host name (a reverse proxy's); repeatable")
    v.add_argument("--port", type=int, default=8765, help="0 picks a free port (printed)")
    v.set_defaults(func=cmd_view)
    s = sub.add_parser("show", help=HELP["show"])
    s.add_argument("run", metavar="RUN")
    s.add_argument("job_id", nargs="?", metavar="JOB_ID")
    s.add_argument("--task", help="pick the job by task id (with --model/--setting/--seed)")
    s.add_argument("--model")
    s.add_argument("--setting")
    s.add_argument("--seed", type=int)
    s.add_argument("--images", help="folder for the images (default: a new temporary folder)")
    s.set_defaults(func=cmd_show)
