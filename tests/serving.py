"""Start ``seq2seq serve`` as a real process on a free loopback port, for the serving tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ADDRESS = re.compile(r" at (http://127\.0\.0\.1:\d+)")


class Server:
    """A running server: its base ``url``, its process and everything it logged."""

    def __init__(self, process: subprocess.Popen, url: str, log: list[str]) -> None:
        self.process, self.url, self.log = process, url, log

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


@contextmanager
def running_server(checkpoint: str | Path, *options: str, startup: float = 120.0):
    """``seq2seq serve --checkpoint CKPT --port 0 OPTIONS``; yields a ``Server`` once /health
    answers ok; SIGTERM on exit."""
    command = [
        sys.executable,
        "-m",
        "seq2seq",
        "serve",
        "--checkpoint",
        str(checkpoint),
        "--port",
        "0",
        *options,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    log: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            log.append(line)
            if not url and (match := ADDRESS.search(line)):
                url.append(match.group(1))
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + startup
        while not found.wait(0.2):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + "".join(log))
        while httpx.get(url[0] + "/health").status_code != 200:  # the port is already open
            time.sleep(0.1)
        yield Server(process, url[0], log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
