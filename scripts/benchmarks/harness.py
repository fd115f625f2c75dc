"""What every bench shares: processes, servers, ports, timing, progress and the machine.

- Workers: each measurement in its own subprocess, so that peak memories do not mix. The
  parent runs a bench again (``scripts/bench.py NAME``) with worker arguments and a
  ``--result`` path (``run_worker``); the worker measures, writes its JSON result there
  (``finish_worker``), and the parent adds the worker's peak resident set from its own rusage.
- Servers: a server process started, waited for and stopped (``running_server``), on a free
  loopback port (``free_port``) or the one it logs.
- Timing: ``timed`` calls, the best of alternating rounds (``Best``), progress lines.
- The machine: its CPU and versions (``machine``), how busy the rest of it was
  (``OtherLoad``), the thread settings every child gets, and profiler tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]  # the repository
ENTRY = ROOT / "scripts" / "bench.py"  # the benches' entry point
DATA = ROOT / "scripts" / "data"  # the benches' own inputs (sentences, segments, manifests)
DOCUMENTS = Path.home() / ".cache" / "seq2seq" / "documents" / "files"  # fetch_documents.py's
ADDRESS = re.compile(r" at (http://127\.0\.0\.1:\d+)")  # where ``seq2seq serve`` says it listens


def described_parser(doc: str) -> argparse.ArgumentParser:
    """A bench's parser whose ``--help`` shows its docstring: the first paragraph before the
    options, the rest, as written, after them."""
    first, _, rest = doc.partition("\n\n")
    formatter = argparse.RawDescriptionHelpFormatter
    return argparse.ArgumentParser(description=first, epilog=rest, formatter_class=formatter)


def write_json(path: str | Path | None, data: Any, indent: int = 2) -> None:
    """``data`` as UTF-8 JSON to ``path`` (a bench's ``--json``), if one was given."""
    if path:
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=indent), "utf-8")


def thread_env(threads: int | None) -> dict[str, str]:
    """The environment for a child: ``threads`` OpenMP/MKL threads (None: the default), and
    the current directory (the repository root) on ``PYTHONPATH``, so that a script run by
    path still imports ``seq2seq`` without an install."""
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    return env


def run_measured(command: list[str], env: dict[str, str], log: Path | None = None) -> float:
    """Runs ``command`` to completion (output to ``log``, else to ours); returns its peak RSS
    in MiB, from its own rusage. Exits with the command line if it fails."""
    stream = open(log, "w", encoding="utf-8") if log else None  # noqa: SIM115
    try:
        process = subprocess.Popen(command, env=env, stdout=stream, stderr=stream)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stream:
            stream.close()
    if process.returncode:
        where = f"; see {log}" if log else ""
        name = Path(sys.argv[0]).name
        raise SystemExit(f"{name}: {' '.join(command)} failed ({process.returncode}){where}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def run_worker(
    bench: str, result: Path, arguments: list[str], threads: int | None
) -> dict[str, Any]:
    """Runs ``python scripts/bench.py BENCH *arguments --result result`` as a worker; its JSON
    result plus ``peak_rss_mib``, the worker process's maximum resident set."""
    command = [sys.executable, str(ENTRY), bench, *arguments, "--result", str(result)]
    peak = run_measured(command, thread_env(threads))
    measured = json.loads(result.read_text())
    measured["peak_rss_mib"] = peak
    return measured


def finish_worker(measure: Callable[[], dict[str, Any]], result: str, threads: int) -> None:
    """The worker's side: ``threads`` torch threads, then ``measure()``'s result (plus the
    thread count) as JSON to ``result``."""
    torch.set_num_threads(threads)
    measured = measure()
    measured["threads"] = torch.get_num_threads()
    Path(result).write_text(json.dumps(measured, indent=2))


def rss_mib(field: str = "VmRSS") -> float:
    """This process's resident set size now; ``field="VmHWM"``: its peak (Linux's; getrusage's
    maxrss would carry the parent's over the exec that starts a spawned process)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def busy_cpu_seconds() -> float:
    """CPU seconds all processes of the machine have used since boot (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its finished children."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usages)


class OtherLoad:
    """How many cores other processes used on average since it was made (our children not
    counted): timings from a busy machine are not comparable."""

    def __init__(self) -> None:
        self.start = busy_cpu_seconds() - own_cpu_seconds()

    def cores(self, elapsed: float) -> float:
        return (busy_cpu_seconds() - own_cpu_seconds() - self.start) / elapsed


def machine(threads: int) -> dict[str, Any]:
    """The CPU, its cores, the thread count and the versions the numbers were measured with."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


# -- timing and progress ---------------------------------------------------------------------


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and the wall seconds it took."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


class Best(dict):
    """The least time of each run over alternating rounds: ``best.add(name, seconds)``."""

    def add(self, name: Any, seconds: float) -> float:
        self[name] = min(self.get(name, seconds), seconds)
        return self[name]


def alternate(
    runs: dict[str, Callable[[], Any]],
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
    each: Callable[[str, Any, float], None] | None = None,
) -> tuple[dict[str, Any], Best]:
    """Each run once a round, in order, the order reversed every other round (so that neither
    always goes first on a machine that warms up or slows down): each run's output of the first
    round and its best time by ``clock`` (``time.process_time``: CPU seconds, which another
    job's turns on a shared machine do not inflate). ``each(name, output, seconds)`` after
    every run."""
    outputs: dict[str, Any] = {}
    best = Best()
    for round_ in range(rounds):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            start = clock()
            output = runs[name]()
            seconds = clock() - start
            best.add(name, seconds)
            outputs.setdefault(name, output)
            if each:
                each(name, output, seconds)
    return outputs, best


def progress(name: str, clock: int = 0) -> Callable[[str], None]:
    """A function printing progress lines on stderr: ``[NAME] line``, or with ``clock`` (a
    width) ``[NAME  12.3 s] line``, the seconds since ``progress`` was called."""
    start = time.perf_counter()

    def say(line: str) -> None:
        stamp = f" {time.perf_counter() - start:{clock}.1f} s" if clock else ""
        print(f"[{name}{stamp}] {line}", file=sys.stderr, flush=True)

    return say


# -- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports on 127.0.0.1 (each socket held until all have a number)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


class Server:
    """A running server: its base ``url``, its ``process`` and its log (``log``: the lines so
    far)."""

    def __init__(self, process: subprocess.Popen, url: str, log_path: Path) -> None:
        self.process, self.url, self.log_path = process, url, log_path
        self.final_log: list[str] | None = None  # kept when stopped: its folder may go

    @property
    def log(self) -> list[str]:
        if self.final_log is not None:
            return self.final_log
        return self.log_path.read_text(encoding="utf-8", errors="replace").splitlines(True)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


@contextmanager
def running_server(
    command: Sequence[str],
    log: Path,
    env: dict[str, str] | None = None,
    url: str | None = None,
    health: str = "/health",
    startup: float = 300.0,
    stop_timeout: float = 60.0,
) -> Iterator[Server]:
    """Starts ``command`` (its output to ``log``) and yields a ``Server`` once ``url + health``
    answers 200; ``url`` None: the one it logs (``seq2seq serve``'s "... at http://..."). On
    exit SIGTERM, then SIGKILL after ``stop_timeout`` seconds. Raises RuntimeError, with the
    log, if the server exits or does not answer within ``startup`` seconds."""
    with open(log, "wb") as stream:
        process = subprocess.Popen(command, stdout=stream, stderr=stream, env=env)
    server = Server(process, url or "", log)
    try:
        deadline = time.monotonic() + startup
        while not server.url and not (match := ADDRESS.search("".join(server.log))):
            _still_starting(server, deadline)
        server.url = server.url or match.group(1)
        while not _answers(server.url + health):
            _still_starting(server, deadline)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if log.exists():  # what it wrote, readable after the caller removes the folder
            server.final_log = server.log


def _answers(url: str) -> bool:
    """Whether a GET of ``url`` answers 200 (no proxy: the server is on this machine)."""
    try:
        with _DIRECT.open(url, timeout=5) as answer:
            return answer.status == 200
    except OSError:  # not listening yet, or an HTTP error status
        return False


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _still_starting(server: Server, deadline: float) -> None:
    if server.process.poll() is not None or time.monotonic() > deadline:
        code = server.process.poll()
        state = f"exited ({code})" if code is not None else "did not answer in time"
        raise RuntimeError(f"the server {state}:\n" + "".join(server.log[-40:]))
    time.sleep(0.2)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def write_profile(fn: Callable[[], Any], path: Path, gpu: bool) -> None:
    """torch.profiler over one call of ``fn``: the top ops by self time, to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        fn()
    sort = "self_device_time_total" if gpu else "self_cpu_time_total"
    path.write_text(prof.key_averages().table(sort_by=sort, row_limit=40, max_name_column_width=60))
