"""A small process between fasteval and a model server, so the server cannot outlive fasteval.

``python -m providers.local.launcher [--grace S] -- CMD...`` runs CMD in the launcher's process
group (fasteval starts the launcher as a new session, so the group holds the server and every
worker it forks). It stops the whole group, SIGTERM then SIGKILL after ``--grace`` seconds, when:

* its stdin reaches EOF: fasteval holds the only write end, and the kernel closes it whatever
  way fasteval ends, ``kill -9`` included;
* its parent dies (``PR_SET_PDEATHSIG``, a second guard should a forked child of fasteval keep
  the pipe open);
* it receives SIGTERM, SIGINT or SIGHUP (fasteval's normal stop).

When the server exits by itself the launcher cleans up the group and exits with its code.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the stdin pipe still guards
        pass


def group_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` (from /proc), the caller excluded."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def _signal_group(pgid: int, sig: int) -> None:
    for pid in group_members(pgid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_group(pgid: int, child: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to everyone in the group, SIGKILL to whoever is left after the grace period."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        child.poll()
        if child.returncode is not None and not group_members(pgid):
            return
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)
    child.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m providers.local.launcher")
    ap.add_argument("--grace", type=float, default=20.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command given")
    parent = os.getppid()
    _set_parent_death_signal(signal.SIGTERM)
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        return 1
    pgid = os.getpgrp()
    print(f"launcher: pid {os.getpid()} group {pgid} starting: {' '.join(cmd)}", flush=True)
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    except OSError as e:
        print(f"launcher: server binary not found or not runnable: {e}", flush=True)
        return 127
    while True:
        if child.poll() is not None:
            print(f"launcher: server exited with code {child.returncode}", flush=True)
            stop_group(pgid, child, 2.0)  # workers the server left behind
            _remove_server_tmpdir()
            return child.returncode if child.returncode >= 0 else 128 - child.returncode
        if stopping:
            break
        try:
            ready, _, _ = select.select([sys.stdin.fileno()], [], [], 0.2)
        except InterruptedError:
            continue
        if ready and not os.read(sys.stdin.fileno(), 4096):
            print("launcher: fasteval is gone (stdin closed); stopping the server", flush=True)
            break
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop_group(pgid, child, a.grace)
    print(f"launcher: server stopped (code {child.returncode})", flush=True)
    _remove_server_tmpdir()
    return 0


def _remove_server_tmpdir() -> None:
    """The server's per-start TMPDIR (vLLM's sockets, vllm_dist_*): gone with the server."""
    tmp = os.environ.get("FASTEVAL_SERVER_TMPDIR")
    if tmp and Path(tmp).name.startswith("fasteval-"):
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
