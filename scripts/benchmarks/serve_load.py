"""The ``serve`` bench's load: concurrent LibreTranslate clients against one server, and what one
client count measures (requests, latencies, the cores each side used, the server's memory)."""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from benchmarks.harness import busy_cpu_seconds
from benchmarks.proc_memory import MIB, descendants, smaps

MEMORY_EVERY = 0.2  # seconds between two readings of the server's resident memory


@dataclass
class Level:
    """One client count's measurement."""

    beam: int
    clients: int
    seconds: float
    requests: int = 0
    sentences: int = 0
    errors: int = 0
    first_error: str | None = None
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    server_cores: float = 0.0  # CPU the server used during the measurement, in cores
    client_cores: float = 0.0  # CPU this process (the load generator) used, in cores
    other_cores: float = 0.0  # CPU everything else on the machine used, in cores
    peak_rss_mib: float = 0.0  # the server's process tree, resident, at its highest reading

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds

    @property
    def sentences_per_s(self) -> float:
        return self.sentences / self.seconds

    def percentile(self, p: int) -> float:
        if len(self.latencies_ms) < 2:
            return self.latencies_ms[0] if self.latencies_ms else float("nan")
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[p - 1]

    @property
    def p50_ms(self) -> float:
        return self.percentile(50)

    @property
    def p99_ms(self) -> float:
        return self.percentile(99)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        del data["latencies_ms"]
        data.update(
            requests_per_s=self.requests_per_s,
            sentences_per_s=self.sentences_per_s,
            p50_ms=self.p50_ms,
            p95_ms=self.percentile(95),
            p99_ms=self.p99_ms,
        )
        return data


@dataclass
class Window:
    """When requests count: those that complete in [start, end]; none start after end."""

    start: float
    end: float


async def run_level(
    url: str,
    server_pid: int,
    sentences: list[str],
    beam: int,
    clients: int,
    warmup: float,
    duration: float,
    timeout: float,
) -> Level:
    """``clients`` concurrent clients for ``warmup + duration`` seconds; the measurement of the
    last ``duration`` seconds (requests still in flight at its end are awaited, not counted).
    A window in which no request completed (a machine too slow or too busy for so short a
    ``duration``) measures nothing: it is measured again, twice as long, at most 3 windows."""
    for _ in range(3):
        level = Level(beam, clients, duration)
        await measure_window(url, server_pid, sentences, level, warmup, timeout)
        if level.requests or level.errors:
            break
        warmup, duration = 0.0, 2 * duration  # the server has answered by now: no warm-up
    return level


async def measure_window(
    url: str, server_pid: int, sentences: list[str], level: Level, warmup: float, timeout: float
) -> None:
    """One window of :func:`run_level`, counted into ``level`` (its ``seconds`` long)."""
    clients = level.clients
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(
        base_url=url, limits=limits, timeout=timeout, trust_env=False
    ) as client:
        now = time.perf_counter()
        window = Window(now + warmup, now + warmup + level.seconds)
        offsets = [i * len(sentences) // clients for i in range(clients)]
        tasks = [client_loop(client, sentences, offset, window, level) for offset in offsets]
        cpu = asyncio.create_task(measure_cpu(server_pid, window, level))
        memory = asyncio.create_task(measure_memory(server_pid, window, level))
        await asyncio.gather(*tasks, cpu, memory)


async def client_loop(
    client: httpx.AsyncClient, sentences: list[str], offset: int, window: Window, level: Level
) -> None:
    """One client: the next sentence, POST /translate, wait for the answer, again."""
    index = offset
    while time.perf_counter() < window.end:
        text = sentences[index % len(sentences)]
        index += 1
        sent = time.perf_counter()
        error = await translate(client, text)
        done = time.perf_counter()
        if not window.start <= done <= window.end:
            if error:  # a failure outside the window still invalidates the run
                count_error(level, error)
            continue
        if error:
            count_error(level, error)
            await asyncio.sleep(0.05)  # no busy loop against a dead server
            continue
        level.requests += 1
        level.sentences += sum(1 for line in text.splitlines() if line.strip())
        level.latencies_ms.append(1000.0 * (done - sent))


async def translate(client: httpx.AsyncClient, text: str) -> str | None:
    """One LibreTranslate request; None if it was answered 200 with a translation, else what
    went wrong."""
    try:
        response = await client.post("/translate", json={"q": text, "source": "en", "target": "zh"})
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}"
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    if not isinstance(response.json().get("translatedText"), str):
        return f"no translatedText in {response.text[:200]}"
    return None


def count_error(level: Level, error: str) -> None:
    level.errors += 1
    level.first_error = level.first_error or error


async def measure_cpu(server_pid: int, window: Window, level: Level) -> None:
    """The cores used during the window by the server, by this process and by the rest."""
    await asyncio.sleep(max(0.0, window.start - time.perf_counter()))
    before = (process_cpu_seconds(server_pid), own_cpu_seconds(), busy_cpu_seconds())
    await asyncio.sleep(max(0.0, window.end - time.perf_counter()))
    after = (process_cpu_seconds(server_pid), own_cpu_seconds(), busy_cpu_seconds())
    server, client, busy = (b - a for a, b in zip(before, after, strict=True))
    seconds = window.end - window.start
    level.server_cores, level.client_cores = server / seconds, client / seconds
    level.other_cores = max(0.0, busy - server - client) / seconds


async def measure_memory(server_pid: int, window: Window, level: Level) -> None:
    """The highest resident memory of the server and its children, summed, read every
    :data:`MEMORY_EVERY` seconds from the start of the warm-up to the end of the window."""
    while True:
        level.peak_rss_mib = max(level.peak_rss_mib, tree_rss(server_pid) / MIB)
        if time.perf_counter() >= window.end:
            return
        await asyncio.sleep(MEMORY_EVERY)


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process below it (0 for those gone)."""
    return sum(smaps(p).get("Rss", 0) for p in descendants(pid))


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
