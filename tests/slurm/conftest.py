"""A real single-node Slurm cluster for the session: munged, slurmctld and slurmd from Debian's
packages, configured in a temporary folder (``SLURM_CONF``), started once and stopped by PID.

Skips, with the reason, where the packages are missing or the daemons do not come up (not root,
no munge): `.ci/run` installs slurm-wlm and munge when it can; `make test-slurm` runs just these.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _node_line() -> str:
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30).stdout
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    mem = int(fields.get("RealMemory", "4000")) * 8 // 10
    return f"NodeName={fields['NodeName']} CPUs={fields.get('CPUs', '2')} RealMemory={mem} State=UNKNOWN"


def _config(root: Path) -> str:
    node = _node_line()
    name = node.split()[0].split("=", 1)[1]
    return "\n".join([
        "ClusterName=fasteval-test", f"SlurmctldHost={name}", f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}", "AuthType=auth/munge", "CryptoType=crypto/munge",
        f"AuthInfo=socket={root}/munge/munge.sock", "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none", "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2", "MinJobAge=3600",
        "MpiDefault=none", "KillWait=5", "OverTimeLimit=0", "MessageTimeout=20", node,
        f"PartitionName=test Nodes={name} Default=YES MaxTime=INFINITE State=UP", ""])


def _stop(root: Path) -> None:
    for pidfile in (root / "slurmd.pid", root / "slurmctld.pid", root / "munge" / "munged.pid"):
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            continue
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    missing = [d for d in (*DAEMONS, "sbatch") if shutil.which(d) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log", "munge"):
        (root / sub).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = root / "slurm.conf"
    conf.write_text(_config(root))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["munged", "--force", f"--socket={root}/munge/munge.sock", f"--key-file={key}",
                        f"--log-file={root}/log/munged.log", f"--pid-file={root}/munge/munged.pid",
                        f"--seed-file={root}/munge/seed"], check=True, env=env, timeout=30)
        subprocess.run(["slurmctld"], check=True, env=env, timeout=60)
        subprocess.run(["slurmd"], check=True, env=env, timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env, timeout=30)
            if out.stdout.strip() in ("idle", "mix", "alloc"):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the node never became idle: {out.stdout.strip() or out.stderr.strip()}")
    except (subprocess.SubprocessError, OSError, RuntimeError) as e:
        logs = "".join(p.read_text(errors="replace")[-800:] for p in (root / "log").glob("*.log"))
        _stop(root)
        pytest.skip(f"the test Slurm cluster did not start: {e}\n{logs}")
    try:
        yield {"SLURM_CONF": str(conf)}
    finally:
        subprocess.run(["scancel", "--user=root"], env=env, capture_output=True, timeout=30, check=False)
        _stop(root)
