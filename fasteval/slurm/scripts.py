"""The two batch scripts of a Slurm sweep, rendered from the submit options.

Paths are absolute and the interpreter is the one running fasteval now, so a task on any node
runs the same code on the same files. Keys never appear: sbatch exports the submitting shell's
environment, and the config names the variables. The array script forwards the warning signal
(``--signal=B:TERM@<grace>``) to fasteval, which stops cleanly so a resubmitted or requeued shard
continues where it stopped; "finished with some jobs in error" (exit 1) counts as a finished shard
so the merge can run.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fasteval.core.errors import BadInput


@dataclass(slots=True)
class SubmitOptions:
    config: Path
    run_dir: Path
    shards: int = 4
    shard_by: str = "job"
    partition: str | None = None
    time: str | None = None
    gpus_per_shard: int | None = None
    cpus_per_shard: int | None = None
    mem: str | None = None
    account: str | None = None
    qos: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    signal_grace_s: int = 120
    requeue: bool = True
    shared_run_dir: bool = False
    """Keep the user's umask for the run folder, the shards' and the logs (``--shared-run-dir``);
    otherwise everything is 0700/0600 like ``fasteval run``'s (fasteval.cli.common)."""
    workdir: Path = field(default_factory=Path.cwd)
    python: str = sys.executable

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubmitOptions:
        paths = {"config", "run_dir", "workdir"}
        kwargs: dict[str, Any] = {k: Path(v) if k in paths else v for k, v in data.items()
                                  if k in cls.__dataclass_fields__}
        return cls(**kwargs)


def _refuse_controls(what: str, value: str) -> str:
    """A newline in a ``#SBATCH`` value would end the directive and start a script line of its own
    (and hide the directives after it): every value is refused on any control character."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        raise BadInput(f"{what} {value!r} holds a control character (a newline ends an #SBATCH line)")
    return value


def _directive(flag: str, value: object) -> str:
    return f"#SBATCH {flag}={_refuse_controls(flag, str(value))}"


def _common(o: SubmitOptions) -> list[str]:
    lines = []
    for flag, value in (("--partition", o.partition), ("--time", o.time), ("--account", o.account),
                        ("--qos", o.qos)):
        if value:
            lines.append(_directive(flag, value))
    return lines


def job_name(o: SubmitOptions, suffix: str = "") -> str:
    """``fasteval-<config stem>``, reduced to characters every shell, sbatch and squeue take as is."""
    stem = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in o.config.stem)
    return f"fasteval-{stem}{suffix}"


def output_pattern(path: Path) -> str:
    """An absolute path as an sbatch filename pattern: ``%`` written ``%%`` so only our ``%a`` expands."""
    return str(path).replace("%", "%%")


def submit_args(o: SubmitOptions, script: str) -> list[str]:
    """What goes on sbatch's command line rather than in the script: the log path, which holds the
    run folder's name (sbatch splits an ``#SBATCH`` line at spaces; an argument is taken whole)."""
    logs = o.run_dir.resolve() / "slurm" / "logs"
    _refuse_controls("--run-dir", str(logs))
    name = "shard-%a.log" if script == "array" else "merge.log"
    return [f"--output={output_pattern(logs)}/{name}"]


def validate(o: SubmitOptions) -> None:
    """Refuse, before anything is written, every value that could not be put in a script safely."""
    for what, value in (("--run-dir", str(o.run_dir.resolve())), ("config", str(o.config.resolve())),
                        ("workdir", str(o.workdir.resolve())), ("python", o.python), ("--mem", o.mem or ""),
                        ("--shard-by", o.shard_by)):
        _refuse_controls(what, value)
    for arg in o.sbatch_args:
        _refuse_controls("--sbatch-arg", arg)
        if not arg.startswith("-"):
            raise BadInput(f"--sbatch-arg {arg!r} is not an option (it becomes `#SBATCH {arg}`)")
    _common(o)


def array_script(o: SubmitOptions) -> str:
    """One task per shard: ``fasteval run CONFIG --shard $SLURM_ARRAY_TASK_ID/N`` into RUN/shards/<i>.

    Every value from the user or the run folder reaches the shell single-quoted (``shlex.quote``)
    in a variable assignment and is used only as ``"$var"``: a run folder named ``my eval``,
    ``$(…)`` or with backticks is a path, never code. The log path goes on sbatch's command line.
    """
    validate(o)
    run = o.run_dir.resolve()
    head = ["#!/bin/bash", f"#SBATCH --job-name={job_name(o)}", f"#SBATCH --array=0-{int(o.shards) - 1}",
            "#SBATCH --open-mode=append", f"#SBATCH --signal=B:TERM@{int(o.signal_grace_s)}"]
    head.append("#SBATCH --requeue" if o.requeue else "#SBATCH --no-requeue")
    head += _common(o)
    if o.gpus_per_shard:
        head.append(f"#SBATCH --gres=gpu:{int(o.gpus_per_shard)}")
    if o.cpus_per_shard:
        head.append(f"#SBATCH --cpus-per-task={int(o.cpus_per_shard)}")
    if o.mem:
        head.append(_directive("--mem", o.mem))
    head += [f"#SBATCH {arg}" for arg in o.sbatch_args]
    q = shlex.quote
    private = "" if o.shared_run_dir else "umask 077  # the shard's folder and files are the user's alone\n"
    share = " --shared-run-dir" if o.shared_run_dir else ""
    body = f"""
# fasteval sweep shard: API keys come from the environment sbatch exported, never from this file.
# The log is RUN/slurm/logs/shard-<task>.log, given to sbatch on its command line (--output).
set -u
{private}fasteval_python={q(o.python)}
fasteval_config={q(str(o.config.resolve()))}
fasteval_run_dir={q(str(run))}
fasteval_shard_by={q(o.shard_by)}
fasteval_shards={int(o.shards)}
cd {q(str(o.workdir.resolve()))}
shard=${{SLURM_ARRAY_TASK_ID}}
echo "fasteval shard $shard/$fasteval_shards on $(hostname) (job ${{SLURM_JOB_ID:-?}}, restart ${{SLURM_RESTART_COUNT:-0}})"
"$fasteval_python" -m fasteval.cli.main run "$fasteval_config" --run-dir "$fasteval_run_dir/shards/$shard" \
  --shard "$shard/$fasteval_shards" --shard-by "$fasteval_shard_by" --no-progress{share} &
child=$!
# Slurm's warning signal reaches this shell (B:); hand it to fasteval, which stops cleanly.
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "fasteval shard $shard exited $code"
# 1 = finished with some jobs in error: the shard is done, so the merge may run
if [ "$code" -eq 1 ]; then code=0; fi
exit "$code"
"""
    return "\n".join(head) + "\n" + body


def merge_script(o: SubmitOptions) -> str:
    """After the array: merge the shards into RUN and write RUN/report.json."""
    validate(o)
    run = o.run_dir.resolve()
    head = ["#!/bin/bash", f"#SBATCH --job-name={job_name(o, '-merge')}", "#SBATCH --open-mode=append"]
    head += _common(o)
    cmd = " ".join(shlex.quote(c) for c in (o.python, "-m", "fasteval.cli.main", "slurm", "merge", str(run)))
    private = "" if o.shared_run_dir else "umask 077\n"
    body = f"""
set -eu
{private}cd {shlex.quote(str(o.workdir.resolve()))}
exec {cmd}
"""
    return "\n".join(head) + "\n" + body
