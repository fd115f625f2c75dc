"""Start the server: load and warm up the model, then serve it with uvicorn until SIGINT or
SIGTERM (stop accepting, finish the requests in flight and the queued work, exit 0)."""

from __future__ import annotations

import logging
import signal
import socket
import time
from pathlib import Path

from seq2seq.errors import ConfigError
from seq2seq.serve.protocol import Limits

log = logging.getLogger("seq2seq.serve")
WARM_UP = ["This sentence warms the model up.", "Hello!"]


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line; blank lines and ``#`` comments are skipped."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--api-keys {path}: file not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    keys = frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    if not keys:
        raise ConfigError(f"--api-keys {path}: no keys in the file")
    return keys


def serve(
    checkpoint: str,
    host: str = "127.0.0.1",
    port: int = 5000,
    engine: str = "torch",
    device: str = "cpu",
    name: str | None = None,
    beam_size: int = 5,
    max_batch_tokens: int = 4000,
    max_wait_ms: float = 5.0,
    max_queue: int = 2000,
    char_limit: int = 5000,
    batch_limit: int = 1000,
    api_keys: str | None = None,
    continuous: bool = True,
    quantize: str | None = None,
    file_limit: int = 200_000,
) -> int:
    """Run ``seq2seq serve`` (the options are the command's; ``--help`` explains them)."""
    import uvicorn

    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.model import ServedModel

    _check(beam_size, max_batch_tokens, max_wait_ms, max_queue, char_limit, batch_limit)
    if file_limit < 1:
        raise ConfigError(f"--file-limit must be >= 1, got {file_limit}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    settings = ServerSettings(beam_size, max_batch_tokens, max_wait_ms, max_queue,
                              Limits(char_limit, batch_limit),
                              read_api_keys(api_keys) if api_keys else None,
                              continuous, file_limit)  # fmt: skip
    start = time.perf_counter()
    served = ServedModel.load(checkpoint, engine, device, name, quantize)
    warm_up(served)
    app = create_app(served, settings)
    listener = socket.create_server((host, port), reuse_port=False)  # port 0: any free port
    address = f"http://{_url_host(host)}:{listener.getsockname()[1]}"
    log.info("serving %s (%s, %s engine on %s, beam %d) from %s at %s; loaded in %.1f s",
             served.name, served.kind, engine, device, beam_size, checkpoint, address,
             time.perf_counter() - start)  # fmt: skip
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=60)
    # uvicorn drains on SIGINT/SIGTERM, then raises the signal again for the handlers it found:
    # no-op ones make a drained shutdown exit 0, as process managers expect.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, lambda *_: None)
    uvicorn.Server(config).run(sockets=[listener])
    log.info("stopped: requests in flight answered, queued work finished")
    return 0


def warm_up(served) -> None:  # noqa: ANN001
    """One decode before the port opens, so the first client does not pay for it."""
    if served.translator is not None:
        served.translator.translate(WARM_UP, beam_size=2)
    else:
        from seq2seq.search import SamplingConfig

        served.generator.complete(["warm up"], 4, SamplingConfig(temperature=0.0))


def _check(beam_size, max_batch_tokens, max_wait_ms, max_queue, char_limit, batch_limit) -> None:  # noqa: ANN001
    for name, value, low in (("--beam-size", beam_size, 1), ("--max-batch-tokens",
                             max_batch_tokens, 1), ("--max-wait-ms", max_wait_ms, 0),
                             ("--max-queue", max_queue, 1), ("--char-limit", char_limit, 1),
                             ("--batch-limit", batch_limit, 1)):  # fmt: skip
        if value < low:
            raise ConfigError(f"{name} must be >= {low}, got {value}")
    if batch_limit > max_queue:
        raise ConfigError(f"--batch-limit ({batch_limit}) must not exceed --max-queue "
                          f"({max_queue}): such a request could never be queued")  # fmt: skip


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
