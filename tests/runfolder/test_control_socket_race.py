"""The control socket's temporary name in a run folder another user can write (a shared folder).

Another user (``nobody``, through ``setpriv``) swaps every temporary entry of the run folder for a
symbolic link to a file of ours, as fast as it can, while the sweep's side binds its socket again
and again. The bind must never chmod the link's target, and ``control.sock`` must never end up a
link: the socket is made in a private folder no one else can write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fasteval.core.errors import ControlRefused
from fasteval.runfolder.control import CONTROL_SOCKET, bind_control_socket, unlink_control_socket

ATTACKER = r"""
import os, sys, time
run_dir, victim, until = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
names = [".control.sock.%s" % sys.argv[4]]
n = 0
while time.monotonic() < until:
    try:
        names = [e for e in os.listdir(run_dir) if e.startswith(".control")] or names
    except OSError:
        pass
    for name in names:
        link = os.path.join(run_dir, "x%d" % n)
        n += 1
        try:
            os.symlink(victim, link)
            os.rename(link, os.path.join(run_dir, name))  # replaces whatever is there
        except OSError:
            with open(os.devnull) as _:
                pass
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fasteval-race-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_no_bind_chmods_a_link_planted_over_its_temporary_name(shared_dir: Path) -> None:
    run_dir = shared_dir / "run"
    run_dir.mkdir()
    run_dir.chmod(0o777)  # a shared run folder: another user may create and rename entries in it
    victim = shared_dir / "victim"
    victim.write_text("not yours")
    victim.chmod(0o644)
    attacker = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                 sys.executable, "-c", ATTACKER, str(run_dir), str(victim), "20", str(os.getpid())])
    binds = refused = 0
    try:
        for _ in range(400):
            try:
                sock = bind_control_socket(run_dir)
            except (OSError, ControlRefused):
                refused += 1  # the attacker got in the way: no socket this time, and nothing changed
                for entry in run_dir.iterdir():
                    if entry.name == CONTROL_SOCKET or entry.name.startswith(".control"):
                        with contextlib.suppress(OSError):
                            entry.unlink()
                continue
            binds += 1
            st = os.lstat(run_dir / CONTROL_SOCKET)
            assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
            unlink_control_socket(run_dir, sock)
            assert stat.S_IMODE(os.stat(victim).st_mode) == 0o644, "a bind chmodded the link's target"
    finally:
        attacker.kill()
        attacker.wait()
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o644
    assert binds > 0, f"no bind succeeded ({refused} refused)"
