"""The run index: compact per-job rows beside ``records.jsonl`` that every reader uses.

Public API (stable)::

    with open_index(run_dir) as idx:          # verifies, self-heals, catches up
        idx.rows(model="m", status="error", limit=50, skip=100)   # -> Iterator[JobRow]
        idx.counts(by=("model", "error_kind"))                   # -> {(model, kind): {status: n}}
        idx.count(status="ok")
        idx.read_record(job_id)                                  # one full record by offset
        idx.iter_records(suite="vistahop")                       # full records, one at a time
    rebuild_index(run_dir)                    # what ``fasteval index rebuild RUN`` does
"""

from fasteval.runindex.index import (
    COLUMNS,
    INDEX,
    JobRow,
    RunIndex,
    RunIndexError,
    open_index,
    rebuild_index,
    row_of_dict,
    row_of_record,
    summarise_line,
)

__all__ = ["COLUMNS", "INDEX", "JobRow", "RunIndex", "RunIndexError", "open_index", "rebuild_index", "row_of_dict",
           "row_of_record", "summarise_line"]
