"""run.log and a quiet terminal while a sweep holds its run folder: ``run``, ``--watch`` and ``--pilot``.

Warnings (ours and third-party libraries', such as math_verify's) go to run.log, where they do not
tear the live panel; a bug of ours leaves its traceback there and one line on the terminal.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from fasteval.core.exitcodes import EXIT_INTERNAL, exit_code_for
from fasteval.core.redact import redact_text
from fasteval.core.terminal import clean
from fasteval.runfolder.diskfaults import RunLogHandler, shown, unwritable_run_dir
from fasteval.runfolder.names import RUN_LOG


def internal_error(e: Exception, run_dir: Path) -> int:
    """One line on the terminal; the traceback went to run.log only (``RunLog.held``)."""
    print(f"internal error (a bug in fasteval, not in your config): {type(e).__name__}: "
          f"{clean(redact_text(str(e)))[:300]}; the traceback is in {shown(run_dir / RUN_LOG)}, "
          "please report it", file=sys.stderr)
    return exit_code_for(e)


class _TerminalFilter(logging.Filter):
    """During a run the terminal shows only errors; warnings (ours and third-party libraries',
    e.g. math_verify's timeout notice) go to run.log, where they do not tear the live panel."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


class RunLog:
    """run.log and a quiet terminal for as long as the sweep holds the run folder's lock.

    ``held`` is ``api.run_planned``'s ``while_held``: opened after the lock, so a refused second
    run writes nothing. ``opened`` and ``bug`` tell the CLI where a Ctrl-C or an exception ended.
    """

    def __init__(self) -> None:
        self.opened = False
        self.bug: Exception | None = None
        """A bug of ours whose traceback went to run.log (the terminal gets one line)."""

    @contextlib.contextmanager
    def held(self, run_dir: Path) -> Iterator[None]:
        try:
            handler = RunLogHandler(run_dir / RUN_LOG)
        except OSError as e:
            raise unwritable_run_dir(e, run_dir) from e
        self.opened = True
        root = logging.getLogger()
        root.addHandler(handler)
        ours = logging.getLogger("fasteval")
        old_level = ours.level
        ours.setLevel(logging.INFO)  # breaker and job failures in full in run.log; third parties stay at WARNING
        quiet = _TerminalFilter()
        terminal = [h for h in root.handlers if h is not handler]
        for h in terminal:
            h.addFilter(quiet)
        logging.captureWarnings(True)
        # Long sweeps hold many small live objects; the default GC thresholds rescan them thousands of
        # times a second. Freeze what startup built and collect young objects less often.
        gc.freeze()
        gc.set_threshold(50_000, 50, 100)
        try:
            yield
        except Exception as e:
            if exit_code_for(e) == EXIT_INTERNAL:  # a bug of ours: its traceback in run.log, the folder kept
                self.bug = e
                handler.handle(ours.makeRecord("fasteval", logging.ERROR, __file__, 0, "internal error: %s",
                                               (type(e).__name__,), sys.exc_info()))
            raise
        finally:
            logging.captureWarnings(False)
            for h in terminal:
                h.removeFilter(quiet)
            ours.setLevel(old_level)
            root.removeHandler(handler)
            handler.close()
