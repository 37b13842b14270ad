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


def _common(o: SubmitOptions) -> list[str]:
    lines = []
    for flag, value in (("--partition", o.partition), ("--time", o.time), ("--account", o.account),
                        ("--qos", o.qos)):
        if value:
            lines.append(f"#SBATCH {flag}={value}")
    return lines


def array_script(o: SubmitOptions) -> str:
    """One task per shard: ``fasteval run CONFIG --shard $SLURM_ARRAY_TASK_ID/N`` into RUN/shards/<i>."""
    run = o.run_dir.resolve()
    name = o.config.stem
    head = ["#!/bin/bash", f"#SBATCH --job-name=fasteval-{name}", f"#SBATCH --array=0-{o.shards - 1}",
            f"#SBATCH --output={run}/slurm/logs/shard-%a.log", "#SBATCH --open-mode=append",
            f"#SBATCH --signal=B:TERM@{o.signal_grace_s}"]
    head.append("#SBATCH --requeue" if o.requeue else "#SBATCH --no-requeue")
    head += _common(o)
    if o.gpus_per_shard:
        head.append(f"#SBATCH --gres=gpu:{o.gpus_per_shard}")
    if o.cpus_per_shard:
        head.append(f"#SBATCH --cpus-per-task={o.cpus_per_shard}")
    if o.mem:
        head.append(f"#SBATCH --mem={o.mem}")
    head += [f"#SBATCH {arg}" for arg in o.sbatch_args]
    cmd = [o.python, "-m", "fasteval.cli.main", "run", str(o.config.resolve()), "--run-dir", f"{run}/shards/$shard",
           "--shard", f"$shard/{o.shards}", "--shard-by", o.shard_by, "--no-progress"]
    quoted = " ".join(c if "$shard" in c else shlex.quote(c) for c in cmd)
    body = f"""
# fasteval sweep shard: API keys come from the environment sbatch exported, never from this file.
set -u
cd {shlex.quote(str(o.workdir.resolve()))}
shard=${{SLURM_ARRAY_TASK_ID}}
echo "fasteval shard $shard/{o.shards} on $(hostname) (job ${{SLURM_JOB_ID:-?}}, restart ${{SLURM_RESTART_COUNT:-0}})"
{quoted} &
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
    run = o.run_dir.resolve()
    head = ["#!/bin/bash", f"#SBATCH --job-name=fasteval-{o.config.stem}-merge",
            f"#SBATCH --output={run}/slurm/logs/merge.log", "#SBATCH --open-mode=append"]
    head += _common(o)
    cmd = " ".join(shlex.quote(c) for c in (o.python, "-m", "fasteval.cli.main", "slurm", "merge", str(run)))
    body = f"""
set -eu
cd {shlex.quote(str(o.workdir.resolve()))}
exec {cmd}
"""
    return "\n".join(head) + "\n" + body
