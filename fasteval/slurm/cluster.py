"""The few Slurm commands fasteval needs (sbatch, squeue, sacct or scontrol, scancel), run as
subprocesses with timeouts; their failures become one readable ``SlurmError`` line.

Job states come from ``sacct`` when the cluster keeps accounting and from ``squeue`` plus
``scontrol show job`` (jobs the controller still remembers) when it does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED",
                    "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"})


class SlurmError(RuntimeError):
    pass


@dataclass(slots=True)
class TaskState:
    job_id: str
    """``<array id>_<task>`` for array tasks, the plain id otherwise."""
    state: str
    exit_code: str = ""


class Cluster:
    """Talks to the Slurm controller named by the environment (``SLURM_CONF``)."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s

    def available(self) -> bool:
        return shutil.which("sbatch") is not None

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, env=os.environ.copy())
        except FileNotFoundError:
            raise SlurmError(f"{cmd[0]} not found: is Slurm installed and on PATH?") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{cmd[0]} did not answer within {self.timeout_s:g} s") from None
        if check and proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise SlurmError(f"{' '.join(cmd[:2])} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
        return proc

    def submit(self, script: str, *args: str) -> str:
        """Submit a batch script; returns its job id."""
        out = self._run("sbatch", "--parsable", *args, script).stdout.strip()
        return out.split(";", 1)[0]

    def test_only(self, script: str) -> str:
        """``sbatch --test-only``: would the controller accept it? Returns its message."""
        proc = self._run("sbatch", "--test-only", script)
        return (proc.stderr or proc.stdout).strip()

    def cancel(self, job_id: str) -> None:
        self._run("scancel", job_id, check=False)

    def states(self, job_ids: list[str]) -> dict[str, TaskState]:
        """State of every task of these jobs (array tasks keyed ``<array>_<task>``)."""
        if not job_ids:
            return {}
        proc = self._run("sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(job_ids), check=False)
        out: dict[str, TaskState] = {}
        if proc.returncode == 0 and "disabled" not in proc.stderr.lower():
            for line in proc.stdout.splitlines():
                jid, state, code = (line.split("|") + ["", ""])[:3]
                if jid:
                    out[jid] = TaskState(jid, state.split()[0] if state else "UNKNOWN", code)
            if out:
                return out
        for jid in job_ids:  # no accounting: ask the controller directly
            proc = self._run("scontrol", "-o", "show", "job", jid, check=False)
            for line in proc.stdout.splitlines():
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                array, tasks = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
                keys = [f"{array}_{t}" for t in expand_tasks(tasks)] if array and tasks else [fields.get("JobId", jid)]
                for key in keys:
                    out[key] = TaskState(key, fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", ""))
        return out


def expand_tasks(spec: str) -> list[int]:
    """Array task ids from Slurm's notation: ``3``, ``0-3``, ``1,4-5`` or ``0-7%2``."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out
