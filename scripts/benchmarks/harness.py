"""Running measurements: each in its own subprocess (a worker), so peak memories do not mix.

The parent runs a script again with worker arguments and a ``--result`` path
(``run_worker``); the worker measures, writes its JSON result there (``finish_worker``), and
the parent adds the worker's peak resident set from its own rusage. Also here: the thread
settings every child gets, how busy the rest of the machine was, and profiler tables.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


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
    script: str, result: Path, arguments: list[str], threads: int | None
) -> dict[str, Any]:
    """Runs ``python script *arguments --result result`` as a worker; its JSON result plus
    ``peak_rss_mib``, the worker process's maximum resident set."""
    command = [sys.executable, str(Path(script).resolve()), *arguments, "--result", str(result)]
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


def rss_mib() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
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
