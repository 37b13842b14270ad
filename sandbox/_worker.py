"""Entry point of one pooled worker process: ``python -m sandbox._worker '<config json>'``.

Import order is the point of this module: the heavy libraries (numpy, PIL with all its plugins,
OpenCV, matplotlib on Agg) load first, as root and with the host's view, so that no call pays
for them; only then does the worker confine itself and start serving frames on its pipes.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _preload() -> None:
    import cv2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageOps  # noqa: F401

    cv2.setNumThreads(1)
    Image.init()
    fig = plt.figure(figsize=(1, 1))
    plt.plot([0, 1])
    fig.savefig(os.devnull, format="png")
    plt.close("all")
    np.zeros((2, 2)).sum()


def main() -> None:
    # The pipes move to private fds so nothing the code prints can corrupt the protocol.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    from sandbox import _jail
    from sandbox._protocol import read_frame, write_frame

    config: dict[str, Any] = json.loads(sys.argv[1])
    try:
        _preload()
        from sandbox._executor import Executor

        if config["isolation"] == "jail":
            _jail.apply_limits(config["limits"])
            _jail.enter_jail(config["host_dir"], config["mount_point"], int(config["uid"]))
            home = _jail.JAIL_HOME
        else:
            home = config["host_dir"]
            os.chdir(home)
            _jail.apply_limits(config["limits"])
            _jail.install_process_guards()
        executor = Executor(home, config["limits"], reap_uid=config["isolation"] == "jail")
    except BaseException as exc:  # report why, so the pool can fall back or say so
        write_frame(resp_fd, {"op": "fatal", "error": f"{type(exc).__name__}: {exc}"})
        return
    write_frame(resp_fd, {"op": "ready", "home": home})
    while True:
        try:
            req, blobs = read_frame(req_fd)
        except EOFError:
            return
        if req["op"] == "run":
            try:
                reply, out = executor.run(req, blobs)
            except Exception as exc:  # e.g. inputs larger than the file-size limit
                reply, out = {"status": "error", "error": f"sandbox: {type(exc).__name__}: {exc}"}, []
            write_frame(resp_fd, reply, out)
        elif req["op"] == "release":
            executor.release(req["session"])
            write_frame(resp_fd, {"status": "ok"})
        else:
            write_frame(resp_fd, {"status": "ok"})


if __name__ == "__main__":
    main()
