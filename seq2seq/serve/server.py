"""Start the server: check the options and take the port, load and warm up the model, then
serve it with uvicorn until SIGINT or SIGTERM (stop accepting, finish the requests in flight and
the queued work, exit 0)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from seq2seq.checks import readable_file
from seq2seq.errors import ConfigError
from seq2seq.serve.handling import ServerSettings
from seq2seq.textio import split_lines

log = logging.getLogger("seq2seq.serve")
T = TypeVar("T")
WARM_UP = ["This sentence warms the model up.", "Hello!"]


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line; blank lines and ``#`` comments are skipped."""
    path = readable_file(path, "--api-keys file")
    try:
        lines = split_lines(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(f"--api-keys {path}: not UTF-8 text (byte {error.start})") from None
    keys = frozenset(
        line.strip() for line in lines if line.strip() and not line.strip().startswith("#")
    )
    if not keys:
        raise ConfigError(f"--api-keys {path}: no keys in the file")
    return keys


@dataclass(frozen=True)
class ServeOptions:
    """What ``serve`` runs: the model to load, the address to listen on, and the settings the
    routes read. With ``ServerSettings``, the one home of ``seq2seq serve``'s defaults: its
    options take theirs from these fields."""

    checkpoint: str | Path  # a .ckpt, or a CTranslate2 export directory (engine ctranslate2)
    host: str = "127.0.0.1"  # "": every address; an IPv6 literal binds IPv6
    port: int = 5000  # 0: any free port
    engine: str = "torch"
    device: str = "cpu"
    model_name: str | None = None  # in /v1/models and the logs (None: the run's name)
    quantize: str | None = None  # "int8": decode in int8 on the CPU
    settings: ServerSettings = ServerSettings()  # checked when made, before the model loads
    shortlist: str | Path | None = None  # a 'seq2seq shortlist' file our engine decodes with


def serve(options: ServeOptions) -> int:
    """Run ``seq2seq serve`` (``--help`` explains each option): take the port, load and warm
    up the model, open the port, and serve until SIGINT or SIGTERM."""
    import uvicorn

    from seq2seq.serve.app import create_app

    # The settings, the key file and the glossary directory were checked when the settings
    # were made; the address is checked here, by binding it: all before the slow load.
    listener = bind(options.host, options.port)
    try:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        start = time.perf_counter()
        served = in_passing_thread(lambda: _loaded_and_warm(options))
        app = create_app(served, options.settings)
        _listen(listener, options.host, options.port)  # the port opens once the model is ready
    except BaseException:
        listener.close()
        raise
    address = f"http://{_url_host(options.host)}:{listener.getsockname()[1]}"
    log.info(
        "serving %s (%s, %s engine on %s, %s, beam %d) from %s at %s; loaded in %.1f s",
        served.name,
        served.kind,
        options.engine,
        options.device,
        served.precision,
        options.settings.beam_size,
        options.checkpoint,
        address,
        time.perf_counter() - start,
    )
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=60)
    # uvicorn drains on SIGINT/SIGTERM, then raises the signal again for the handlers it found:
    # no-op ones make a drained shutdown exit 0, as process managers expect.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, lambda *_: None)
    uvicorn.Server(config).run(sockets=[listener])
    log.info("stopped: requests in flight answered, queued work finished")
    return 0


def _loaded_and_warm(options: ServeOptions):  # noqa: ANN202
    from seq2seq.serve.served_model import ServedModel

    served = ServedModel.load(
        options.checkpoint,
        options.engine,
        options.device,
        options.model_name,
        options.quantize,
        options.shortlist,
    )
    warm_up(served)
    return served


def in_passing_thread(work: Callable[[], T]) -> T:
    """``work()`` run in a thread that then ends. PyTorch's OpenMP (libgomp) keeps a pool of
    threads for every thread that ran parallel work; once a process holds more such threads
    than cores, libgomp stops spinning between parallel regions and every one of a decode's
    thousands of small regions waits on a futex. Loading and warming up here, not in the
    main thread, leaves the model thread's pool the only one: measured on 2 cores, one
    sentence at beam 4 took 59-65 ms in the model thread after a load in the main thread,
    and 32-34 ms after a load in a passing thread (as in a single-threaded script)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=run, name="seq2seq-load", daemon=True)  # Ctrl-C exits
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def warm_up(served) -> None:  # noqa: ANN001
    """One decode before the port opens, so the first client does not pay for it."""
    if served.translator is not None:
        from seq2seq.inference.options import TranslateOptions

        served.translator.translate(WARM_UP, TranslateOptions(beam_size=2))
    else:
        from seq2seq.decoding.sampling import SamplingConfig

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
        address = socket.getaddrinfo(
            host or None, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
        )[0][4]
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
