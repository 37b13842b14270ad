"""The ``fasteval`` command line: builds the parser from each command's module and dispatches.

Each built-in command lives in a module of its own under ``fasteval.cli``; command groups that
belong to their packages (cache, slurm, index, view, ...) are added only when one of them runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import Any

from fasteval.cli import compare, data, merge, report, rescore, run, score_file, status, tool
from fasteval.cli.common import print_error
from fasteval.core.errors import UsageError
from fasteval.core.exitcodes import exit_code_for
from fasteval.core.redact import RedactingFilter, redact_text
from fasteval.core.terminal import clean

BUILTIN_COMMANDS = (run, status, report, compare, merge, tool, rescore, score_file, data)


class _VersionAction(argparse.Action):
    """``--version``, reading the installed version only when asked (importlib.metadata: ~60 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from fasteval.core.version import fasteval_version

        print(f"fasteval {fasteval_version()}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` being run, only what it needs is imported."""
    ap = argparse.ArgumentParser(prog="fasteval", description="High-throughput async evaluator for "
                                 "multimodal models that think with images.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    for module in BUILTIN_COMMANDS:
        module.add_parser(sub)
    if command is None or command not in sub.choices:
        _add_optional_commands(sub)  # their imports cost every built-in command ~0.2 s otherwise
    return ap


# Command groups that live with their packages: each module has ``add_parser(sub)``.
COMMAND_MODULES: tuple[str, ...] = ("cache.cli", "fasteval.cli.slurm", "fasteval.cli.index", "fasteval.cli.catalog",
                                   "fasteval.cli.view", "fasteval.cli.prompts", "fasteval.cli.serve",
                                   "fasteval.cli.batches", "fasteval.cli.ctl")


def _add_optional_commands(sub: Any) -> None:
    """Register the command groups of COMMAND_MODULES (one line each, so packages stay apart)."""
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for h in logging.getLogger().handlers:
        h.addFilter(RedactingFilter())
    args = sys.argv[1:] if argv is None else list(argv)
    a = build_parser(next((x for x in args if not x.startswith("-")), None)).parse_args(args)
    # A SIGTERM before the sweep installs its own handlers (a Slurm warning that arrives while the
    # suites load) stops as cleanly as Ctrl-C: nothing is written yet, and the rerun resumes.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        code: int = a.func(a)
    except KeyboardInterrupt as e:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return exit_code_for(e)
    except UsageError as e:  # ours, e.g. a planted link in a run folder: one line
        print_error(e)
        return exit_code_for(e)
    except Exception as e:  # a bug of ours: never exit 1 ("some jobs failed") or 2 ("fix your config")
        print(clean(redact_text(traceback.format_exc()), block=True), file=sys.stderr, end="")
        print(f"internal error (a bug in fasteval): {type(e).__name__}; please report it with the traceback above",
              file=sys.stderr)
        return exit_code_for(e)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
