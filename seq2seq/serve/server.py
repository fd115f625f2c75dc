"""Start the server: check the options and take the port, load and warm up the model, then
serve it with uvicorn until SIGINT or SIGTERM (stop accepting, finish the requests in flight and
the queued work, exit 0)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from pathlib import Path

from seq2seq.checks import readable_file, writable_directory
from seq2seq.errors import ConfigError
from seq2seq.serve.protocol import Limits

log = logging.getLogger("seq2seq.serve")
WARM_UP = ["This sentence warms the model up.", "Hello!"]


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line; blank lines and ``#`` comments are skipped."""
    path = readable_file(path, "--api-keys file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise ConfigError(f"--api-keys {path}: not UTF-8 text (byte {error.start})") from None
    keys = frozenset(line.strip() for line in lines
                     if line.strip() and not line.strip().startswith("#"))  # fmt: skip
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
    glossary_dir: str | None = None,
) -> int:
    """Run ``seq2seq serve`` (the options are the command's; ``--help`` explains them)."""
    import uvicorn

    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.served_model import ServedModel

    # The settings, the key file, the glossary directory and the address are checked before
    # the slow load.
    if glossary_dir is not None:
        writable_directory(glossary_dir, "--glossary-dir")
    settings = ServerSettings(beam_size, max_batch_tokens, max_wait_ms, max_queue,
                              Limits(char_limit, batch_limit),
                              read_api_keys(api_keys) if api_keys else None,
                              continuous, file_limit,
                              Path(glossary_dir) if glossary_dir else None)  # fmt: skip
    listener = bind(host, port)
    try:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        start = time.perf_counter()
        served = ServedModel.load(checkpoint, engine, device, name, quantize)
        warm_up(served)
        app = create_app(served, settings)
        _listen(listener, host, port)  # the port opens once the model is ready
    except BaseException:
        listener.close()
        raise
    address = f"http://{_url_host(host)}:{listener.getsockname()[1]}"
    log.info("serving %s (%s, %s engine on %s, %s, beam %d) from %s at %s; loaded in %.1f s",
             served.name, served.kind, engine, device, served.precision, beam_size, checkpoint,
             address, time.perf_counter() - start)  # fmt: skip
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
        from seq2seq.decoding.search import SamplingConfig

        served.generator.complete(["warm up"], 4, SamplingConfig(temperature=0.0))


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one; host "": every address), not
    yet listening: a port in use or a host that is not this machine's is found before the
    model loads, and clients are refused, not kept waiting, until ``_listen``. An IPv6
    literal host binds IPv6."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host or None, port, family, socket.SOCK_STREAM, 0,
                                     socket.AI_PASSIVE)[0][4]  # fmt: skip
    except socket.gaierror as error:
        raise ValueError(f"--host {host}: cannot resolve it ({error.strerror})") from None
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name == "posix":  # as socket.create_server: a restart takes its port at once
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
    except OSError as error:  # in use, below 1024 without root, not this machine's address
        listener.close()
        raise _cannot_listen(host, port, error) from None
    return listener


def _listen(listener: socket.socket, host: str, port: int) -> None:
    try:
        listener.listen()
    except OSError as error:  # another process took the port while the model loaded
        raise _cannot_listen(host, port, error) from None


def _cannot_listen(host: str, port: int, error: OSError) -> ValueError:
    return ValueError(f"cannot listen on --host {host} --port {port}: {error.strerror or error}")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
