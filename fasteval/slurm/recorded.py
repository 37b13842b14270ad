"""What ``slurm resume`` may take from ``RUN/slurm/jobs.json`` before it writes and submits scripts.

Resume renders new batch scripts from the options submit recorded: the interpreter, the working
folder, ``#SBATCH`` lines. On a shared filesystem, whoever can write that file (or the folder it
lives in) would choose the code the user's next job runs. So the file must be the user's own and
writable by nobody else, every field must have its type, the run folder must be the one asked
for, and the interpreter and working folder must still exist; the interpreter must also be the
one running resume now, unless the user names it with ``--python``. Anything else is refused
with the reason, before anything is written.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from fasteval.slurm.scripts import SubmitOptions, validate

_TYPES: dict[str, tuple[type, ...]] = {
    "config": (str,), "run_dir": (str,), "shards": (int,), "shard_by": (str,), "partition": (str, type(None)),
    "time": (str, type(None)), "gpus_per_shard": (int, type(None)), "cpus_per_shard": (int, type(None)),
    "mem": (str, type(None)), "account": (str, type(None)), "qos": (str, type(None)), "sbatch_args": (list,),
    "signal_grace_s": (int,), "requeue": (bool,), "workdir": (str,), "python": (str,),
}


class UntrustedJobs(ValueError):
    """``jobs.json`` cannot be used as written; the message says why and what to do."""


def _owned_by_me(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedJobs(f"{path} is a symbolic link; resume reads only a file submit wrote")
    if st.st_uid != os.getuid():
        raise UntrustedJobs(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}): "
                            "resume runs what it names as you")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedJobs(f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}): anyone who can "
                            f"write it chooses what resume runs; `chmod go-w {path}` if you trust its content")


def _typed(options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise UntrustedJobs("jobs.json has no options object")
    for key, types in _TYPES.items():
        if key not in options:
            raise UntrustedJobs(f"jobs.json options lack {key!r}")
        value = options[key]
        # bool is an int to Python: a shard count of `true` is still not a count.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise UntrustedJobs(f"jobs.json options.{key} is {type(value).__name__}, not {types[0].__name__}")
    if not isinstance(options.get("shared_run_dir", False), bool):  # absent in folders submitted before it
        raise UntrustedJobs("jobs.json options.shared_run_dir is not a bool")
    if not all(isinstance(x, str) for x in options["sbatch_args"]):
        raise UntrustedJobs("jobs.json options.sbatch_args must be strings")
    if options["shards"] < 1 or options["signal_grace_s"] < 0:
        raise UntrustedJobs("jobs.json options: shards must be at least 1 and signal_grace_s not negative")
    return options


def trusted_options(run_dir: Path, jobs_file: Path, jobs: Any, python: str | None = None) -> SubmitOptions:
    """The submit options in ``jobs``, checked; raises UntrustedJobs with the reason."""
    _owned_by_me(jobs_file)
    _owned_by_me(jobs_file.parent)
    if not isinstance(jobs, dict):
        raise UntrustedJobs(f"{jobs_file} is not a JSON object")
    o = SubmitOptions.from_json(_typed(jobs.get("options")))
    if o.run_dir.resolve() != run_dir.resolve():
        raise UntrustedJobs(f"{jobs_file} was written for the run folder {o.run_dir}, not {run_dir}")
    if not o.workdir.is_absolute() or not o.workdir.is_dir():
        raise UntrustedJobs(f"the working folder submit recorded, {o.workdir}, is not an existing absolute folder")
    chosen = python or o.python
    exe = Path(chosen)
    if not exe.is_absolute() or not exe.is_file() or not os.access(exe, os.X_OK):
        raise UntrustedJobs(f"the interpreter {chosen} is not an existing executable (absolute path)")
    # Paths, not files, are compared: two venvs' pythons are links to one binary, but each venv
    # imports its own site-packages.
    if python is None and os.path.abspath(exe) != os.path.abspath(sys.executable):
        raise UntrustedJobs(f"jobs.json names the interpreter {o.python}, but resume runs under {sys.executable}: "
                            f"run resume with that interpreter, or pass --python {o.python} to confirm it")
    o.python = chosen
    try:
        validate(o)
    except ValueError as e:
        raise UntrustedJobs(f"jobs.json: {e}") from None
    return o
