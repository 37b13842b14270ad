"""Errors that cross layers live in this leaf, so raising one never imports the module that handles it.

A suite's reference-text loader or a tool's option check raises ``ConfigError`` without pulling in
the config loader (which imports the suites and tools: a cycle, before this module existed).
"""

from __future__ import annotations

import errno


class UsageError(Exception):
    """What every error the user can fix before anything runs shares: one line, exit 2.

    A config, a flag, a run folder that is not ours to continue. The CLI catches this base and
    nothing broader, so a KeyError or ValueError from a bug of ours is never passed off as one.
    """


class ConfigError(ValueError, UsageError):
    """A config that cannot run; ``problems`` holds one line per problem (file:line: key.path: message)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class BadInput(ValueError, UsageError):
    """A value or file the user handed a command that it cannot use: malformed JSON in an option,
    an unknown name, a file in the wrong format or missing. Raised where the input is parsed; one
    line, exit 2."""


class ModelConfigError(ConfigError):
    """A model or role entry that cannot become a client (its provider, ``serve``, limits, images): exit 2."""


class RunDirUnwritable(RuntimeError, UsageError):
    """The run folder cannot be written at all (read-only, no permission): exit 2, nothing ran."""


class UnsafeRunFolder(RuntimeError, UsageError):
    """A run folder file that is a symbolic link (or otherwise not ours to open): refused, never followed.

    Run folders are shared (clusters, e-mail): a planted link would make a report embed, or a
    resume truncate, a file outside the folder. The CLI prints the message and exits 2.
    """


class RunFolderBusy(RuntimeError, UsageError):
    """Another command holds the run folder's lock (``runfolder/lock.py``): refused before writing.

    Two sweeps on one folder would run, and pay for, every job twice. The CLI prints the message
    (which names the holder) and exits 2.
    """


class NoSweepRunning(RuntimeError, UsageError):
    """``fasteval ctl`` found no live sweep behind a run folder's control socket (none, or a stale one).

    The message is one line that says which (no socket; a socket left by a sweep that ended); the
    CLI prints it and exits 2.
    """


class ControlAnswerUnreadable(RuntimeError, UsageError):
    """A control socket answered something ``fasteval ctl`` cannot read (not JSON, not an answer object,
    or one without the fields it shows): a sweep of another version, or not a sweep at all. One line, exit 2."""


class ControlRefused(RuntimeError, UsageError):
    """A running sweep's control socket cannot be taken over (another live sweep owns it, or the
    path is not a socket we made): the new sweep refuses to start rather than steal or follow it."""


class DamagedRunFolder(RuntimeError, UsageError):
    """A run folder file that is not what fasteval writes (a manifest that is no JSON object): exit 2.

    A crash of another tool, a hand edit or a copy cut short; the message names the file, and the
    user restores it or starts a new ``--run-dir``.
    """


class PreflightFailed(ConfigError):
    """Preflight found endpoints not ready (``problems``: one line each): nothing ran, no folder, exit 2.

    A ``ConfigError`` as before, so API callers that caught that still do; its own type lets the CLI
    print the problems as a list and tell them from a config error the sweep raised later.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("preflight: " + "; ".join(problems), problems)


DESCRIPTOR_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
"""Out of file descriptors: this process's limit (``ulimit -n``), or the system's."""


class OutOfDescriptors(BaseException):
    """The process (or the system) ran out of file descriptors: a local fault, like a full disk.

    Nothing the job did is wrong and no retry of it can help while the process is at its limit,
    so no record may blame it (an image that "cannot be encoded", an internal error). A
    BaseException, like EndpointDown, on purpose: the catch-alls that turn a tool's or a judge's
    failure into a value on the record let it by, and the sweep stops with one line and exit 3.
    """

    def __init__(self, error: OSError, where: str = "") -> None:
        super().__init__(f"out of file descriptors{f' ({where})' if where else ''}: {error.strerror or error}")
        self.error = error
        self.where = where


def descriptor_fault(exc: BaseException | None) -> OSError | None:
    """The EMFILE / ENFILE behind ``exc`` (itself, or what caused it, a few links down), else None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in DESCRIPTOR_ERRNOS:
            return exc
        inner = getattr(exc, "os_error", None)  # aiohttp's connector errors carry the socket's error
        if isinstance(inner, OSError) and inner.errno in DESCRIPTOR_ERRNOS:
            return inner
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
