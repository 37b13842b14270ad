"""The ``fasteval`` command line: builds the parser from each command's module and dispatches.

Each command lives in a module of its own (``fasteval.cli.commands`` names it); only the module of
the command being run is imported, so a light command stays light.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import Any

from fasteval.cli.commands import COMMANDS, MODULE
from fasteval.cli.common import print_error
from fasteval.core.errors import UsageError
from fasteval.core.exitcodes import EXIT_PIPE_CLOSED, exit_code_for
from fasteval.core.redact import RedactingFilter, redact_text
from fasteval.core.terminal import clean


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
    """The command line. Only the module of ``command`` is imported (its own arguments); every other
    command is listed from ``fasteval.cli.commands`` by name and help, so ``fasteval --help``,
    ``status`` or ``ctl`` never import the sweep. ``command=None`` builds every command in full."""
    ap = argparse.ArgumentParser(prog="fasteval", description="High-throughput async evaluator for "
                                 "multimodal models that think with images.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    wanted = {module for _, module, _ in COMMANDS} if command is None else {MODULE.get(command)}
    for name, module, text in COMMANDS:
        if name in sub.choices:
            continue  # added with another command of its module
        if module in wanted:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=text)  # listed only: nothing of it runs in this process
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for h in logging.getLogger().handlers:
        h.addFilter(RedactingFilter())
    args = sys.argv[1:] if argv is None else list(argv)
    command = next((x for x in args if not x.startswith("-")), "")
    a = build_parser(command).parse_args(args)
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
        if isinstance(e, BrokenPipeError) and _stdout_closed():  # `| head -1` done: not a socket's
            return _quiet_after_closed_stdout()
        print(clean(redact_text(traceback.format_exc()), block=True), file=sys.stderr, end="")
        print(f"internal error (a bug in fasteval): {type(e).__name__}; please report it with the traceback above",
              file=sys.stderr)
        return exit_code_for(e)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code


def _stdout_closed() -> bool:
    """Has the reader of stdout gone (``| head -1`` done)? The write end of a pipe whose reader
    closed polls as an error; a file, a terminal or a captured stream never does."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_after_closed_stdout() -> int:
    """Stop as a Unix tool does when its reader leaves: nothing on stderr, exit 141. stdout now goes
    to /dev/null, so the interpreter's last flush of what is still buffered cannot fail loudly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE_CLOSED


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
