"""Start ``seq2seq serve`` as a real process on a free loopback port, for the serving tests
(the benches' server helper: ``scripts/benchmarks/harness.py``), and what those tests send."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from benchmarks import harness


@contextmanager
def running_server(checkpoint: str | Path, *options: str, startup: float = 120.0):
    """``seq2seq serve --checkpoint CKPT --port 0 OPTIONS``; yields a ``Server`` (``url``,
    ``process``, ``log``: the lines it wrote so far) once /health answers ok; SIGTERM on
    exit."""
    command = [sys.executable, "-m", "seq2seq", "serve", "--checkpoint", str(checkpoint)]
    command += ["--port", "0", *options]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    with tempfile.TemporaryDirectory(prefix="serve.") as folder:
        log = Path(folder) / "server.log"
        with harness.running_server(command, log, env, startup=startup) as server:
            yield server


# Sentences the tiny test model reads (tests/helpers.py's corpus).
SENTENCES = ["I will buy apples today.", "She can see the book tomorrow.", "We should eat."]


def libre_translate(http, **fields):
    """LibreTranslate's ``POST /translate`` of en→zh with ``fields`` (q, format, ...)."""
    return http.post("/translate", json={"source": "en", "target": "zh", **fields})
