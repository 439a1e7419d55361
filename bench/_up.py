"""`bxctl up` as a child process of a benchmark: started, waited for, stopped."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def bxctl_up(bxctl: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """Run `bxctl up` until it says "boxmaker is up"; Ctrl-C it (SIGINT) at the end.

    Its log is read and dropped meanwhile, so the pipe never fills.
    """
    up = subprocess.Popen(
        [*bxctl, "up"], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert up.stderr is not None
    try:
        for line in up.stderr:
            if "boxmaker is up" in line:
                break
        else:
            raise SystemExit("bxctl up did not start")
        threading.Thread(target=up.stderr.read, daemon=True).start()
        yield up
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=120)
