"""Small printing helpers every command shares."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fasteval.core.terminal import clean, json_text, plain

if TYPE_CHECKING:
    from rich.console import Console

    from fasteval.core.errors import ConfigError


def print_json(obj: Any) -> None:
    """JSON for scripts and terminals alike: C1 controls in strings escaped too (json_text)."""
    sys.stdout.write(json_text(obj) + "\n")


def print_error(e: object) -> None:
    """``error: <message>`` on stderr, redacted, control characters escaped and the message's own
    newlines kept: a changed config lists its changes one a line, never as a literal ``\\x0a``."""
    from fasteval.core.redact import redact_text

    print(f"error: {clean(redact_text(str(e)), block=True)}", file=sys.stderr)


def print_config_error(e: ConfigError) -> None:
    for line in str(e).splitlines():
        print(clean(f"error: {line.strip()}" if not line.startswith("  ") else line), file=sys.stderr)


def print_pending(pending: dict[str, list[str]]) -> None:
    """One note per checkpoint a series skipped as still being written (``config.series.unfinished``):
    a later run, or ``--watch``, takes it once it is done."""
    for name, lines in pending.items():
        for line in lines:
            print(clean(f"note: series {name}: skipped {line}; a later run takes it"), file=sys.stderr)


def json_object(text: str, flag: str) -> dict[str, Any]:
    """A command-line option that holds a JSON object, parsed; BadInput (exit 2) says what is wrong."""
    import orjson

    from fasteval.core.errors import BadInput

    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise BadInput(f"{flag} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise BadInput(f"{flag} must be a JSON object, not {type(value).__name__}")
    return value


def console() -> Console:
    """Wide enough for the report table even when stdout is a pipe or a CI log (Rich loads here:
    commands that print no table never import it)."""
    cls = _console_class()
    return cls() if sys.stdout.isatty() else cls(width=160)


@functools.cache
def _console_class() -> type[Console]:
    """Rich's Console, but a closed stdout raises BrokenPipeError (cli/main.py ends the command as a
    Unix tool does) instead of Rich's own ``SystemExit(1)``, which would read as "some jobs failed"."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "stdout closed")

    return PipeConsole


def fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"


PRIVATE_UMASK = 0o077


@contextlib.contextmanager
def private_run_files(shared: bool) -> Iterator[None]:
    """Run folders hold prompts, answers, error bodies and server logs: 0700 folders and 0600 files
    while the command runs (the umask, so SQLite's and the servers' own files follow too; restored
    after). ``shared`` keeps the user's umask (``--shared-run-dir``, for a group that reads it)."""
    if shared:
        yield
        return
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def print_completion(done: dict[str, Any] | None) -> None:
    """A partial run says so above its numbers (``fasteval.view.completion``): done / total and why."""
    if done and done.get("line"):
        console().print(plain(done["line"], style="bold yellow"))


def print_control(trace: list[dict[str, Any]] | None) -> None:
    """The changes made to the running sweep (``fasteval ctl``): measured under them, so shown with them."""
    if not trace:
        return
    from fasteval.runfolder.control import trace_summary

    console().print(plain(f"steered while it ran ({len(trace)} changes, control.jsonl):"))
    for line in trace_summary(trace).splitlines():
        console().print(plain("  " + line))
