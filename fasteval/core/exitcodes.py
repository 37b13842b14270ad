"""Exit codes of every ``fasteval`` command, in one place so scripts and Slurm can rely on them.

0: everything finished ok; 1: finished, some jobs ended in error; 2: a config, usage or preflight
error (nothing ran, no run folder claimed); 3: incomplete (an endpoint stayed down, or a fatal
local fault such as a full disk stopped the sweep; rerun to continue); 70: an internal error (a
bug of ours, reported with its traceback in run.log; the run folder is kept); 130: interrupted;
141: the reader of stdout went away (``fasteval list policies | head -1``), as a shell reports a tool
that SIGPIPE ended.
``fasteval compare --gate`` exits 1 when a comparison finds a regression.
"""

from __future__ import annotations

from fasteval.core.errors import UsageError

EXIT_OK = 0
EXIT_JOB_ERRORS = 1
EXIT_REGRESSION = 1
"""``fasteval compare --gate``: some suite × setting is worse than the baseline."""
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_INTERNAL = 70
"""sysexits' EX_SOFTWARE: neither the config nor the run's data is at fault, so 2 would send the
user hunting for a typo and 1 would claim some jobs ran."""
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141
"""128 + SIGPIPE: what ``set -o pipefail`` sees of ``yes | head -1``. Python ignores SIGPIPE, so a
write to a closed stdout raises instead; the command stops quietly with the code a Unix tool has."""


class RunIncomplete(RuntimeError):
    """A sweep stopped before its plan was done for a reason a rerun can fix (exit 3).

    The message is one readable line for the terminal (e.g. ``disk full writing
    runs/x/records.jsonl: free space, then rerun``); details go to ``run.log``.
    """


def exit_code_for(exc: BaseException) -> int:
    """The exit code an exception that ends a command stands for; anything not ours is a bug (70).

    Our errors say what the user can do (fix the config, free space, rerun); a KeyError or
    ValueError that reaches a command's top is a bug in fasteval and must never pass for one.
    """
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, RunIncomplete):
        return EXIT_INCOMPLETE
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    return EXIT_INTERNAL
