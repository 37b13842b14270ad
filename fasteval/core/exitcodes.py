"""Exit codes of every ``fasteval`` command, in one place so scripts and Slurm can rely on them.

0: everything finished ok; 1: finished, some jobs ended in error; 2: a config, usage or preflight
error (nothing ran, no run folder claimed); 3: incomplete (an endpoint stayed down, or a fatal
local fault such as a full disk stopped the sweep; rerun to continue); 130: interrupted.
``fasteval compare --gate`` exits 1 when a comparison finds a regression.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_ERRORS = 1
EXIT_REGRESSION = 1
"""``fasteval compare --gate``: some suite × setting is worse than the baseline."""
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130


class RunIncomplete(RuntimeError):
    """A sweep stopped before its plan was done for a reason a rerun can fix (exit 3).

    The message is one readable line for the terminal (e.g. ``disk full writing
    runs/x/records.jsonl: free space, then rerun``); details go to ``run.log``.
    """
