"""Data preparation at scale: the memory, time and disk that ``prepare_data`` takes for N pairs,
then reloading the cache, the loader's speed and each DDP rank's private memory.

    python scripts/bench_data.py --sizes 250k,1M,4M
    python scripts/bench_data.py --sizes 5000,20000 --peer /tmp/peer --num-proc 2

The corpus: N distinct synthetic pairs, a TSV written once per size into ``--work`` (kept there
for later runs). Pair k joins two real pairs of the bundled corpus: English
``en_a + " " + en_b``, Chinese ``zh_a + zh_b``, with a = k mod M and b = (a + k div M + 1) mod M
over M real pairs; those are the bundled pairs cleaned as preparation cleans them, one per
English sentence, none longer than half of ``max_len_chars``, and no English sentence followed
by a space starting another. Then k → (a, b) is one-to-one for k < M(M-1) and the joined
English decomposes in one way only, so the N English sides, and so the pairs, are distinct
(also checked while writing).

Per size and per implementation (this checkout; with ``--peer``, the ``seq2seq`` package of
another checkout, e.g. a ``git worktree`` of an older commit, imported through PYTHONPATH),
each step in fresh child processes, each with its own empty directory (cache, HF_DATASETS_CACHE
and TMPDIR all inside):

1. prepare: ``TranslationDataModule(corpus="tsv", ...).prepare_data()``, with ``num_proc`` where
   the constructor takes it. Every ``--interval`` s the parent sums the PSS (``smaps_rollup``) of
   the child and all its descendants (``/proc/*/stat`` parent links): the peak is the tree's
   memory. The largest process's peak RSS is its high-water mark (``wait4``'s ``ru_maxrss``, of
   the child and its waited-for descendants) or the largest sample, whichever is larger. Wall
   time is ``prepare_data`` alone, timed in the child; CPU time is the tree's user + sys
   (``wait4``) less what the child spent before ``prepare_data`` (start-up, shown apart). Peak
   disk is the directory sampled every second. Samples miss spikes shorter than the interval.
2. reload, in a new child: ``setup()`` wall time (the page cache is warm: the files were just
   written), the child's USS (``Private_Clean + Private_Dirty``) and PSS after it and what
   ``setup`` added to the USS, then ``train_dataloader()`` iterated for ``--loader-batches``
   batches or ``--loader-seconds``: tokens (``n_src_tokens + n_tgt_tokens``) per second and per
   pair.
3. two ranks: two children at once, each ``setup()`` and then the training loader of rank r of 2
   (a stand-in trainer with ``world_size`` 2 and ``global_rank`` r), ``--rank-batches`` batches;
   once both hold them, the parent reads each one's USS and PSS (and their growth since just
   before ``setup()``, which the child reads), then lets both exit.

The interpreter and its libraries take hundreds of MiB of PSS before any data (the start-up
line prints it); how much of that is private or shared depends on what else runs (other Python
processes map the same libraries), so at small sizes that noise outweighs the data: fit the
line over sizes of 250k and up. The columns of growth (setup's, the ranks') leave the
libraries out.

Prints one table per implementation, a least-squares line of peak PSS against pairs with its
values at 26M and 100M pairs, and, with a peer, this checkout's numbers over the peer's.
A failed step prints its child's stderr tail and marks its cells failed; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARK = "BENCH_DATA "  # starts the one result line a child prints on stdout
EXTRAPOLATE = (26_000_000, 100_000_000)
SUFFIXES = {"k": 1_000, "m": 1_000_000}
KIB, MIB, GIB = 1024, 1024**2, 1024**3
_START = time.perf_counter()


def say(line: str) -> None:
    """A progress line on stderr, with the seconds since the run started."""
    print(f"[bench_data {time.perf_counter() - _START:7.1f} s] {line}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    """``250k`` → 250000, ``1M`` → 1000000, ``20000`` → 20000."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 250k, 1M, 20000)")
    number, suffix = match.groups()
    return round(float(number) * SUFFIXES.get(suffix.lower(), 1))


def parse_sizes(text: str) -> dict[int, str]:
    """``"250k,1M"`` → ``{250000: "250k", 1000000: "1M"}`` (pairs → label)."""
    return {parse_size(size): size.strip() for size in text.split(",")}


# ----------------------------------------------------------------------------- the corpus
Pair = tuple[str, str]


def base_pairs(max_chars: int) -> list[Pair]:
    """The bundled pairs, cleaned, one per English sentence, each side at most ``max_chars``,
    and no English sentence followed by a space starting another (see :func:`synthetic_pair`)."""
    from seq2seq.data.clean import clean_pairs
    from seq2seq.data.sources import load_bundled

    cleaned, _ = clean_pairs(load_bundled())
    by_english: dict[str, str] = {}
    for en, zh in cleaned:
        if len(en) <= max_chars and len(zh) <= max_chars:
            by_english.setdefault(en, zh)
    return space_prefix_free(list(by_english.items()))


def space_prefix_free(pairs: list[Pair]) -> list[Pair]:
    """``pairs`` less those whose English followed by a space starts another's English."""
    import bisect

    english = sorted(en for en, _ in pairs)

    # The strings starting with p = s + " " come in sorted order as one run from p up: one
    # exists if the first string not below p is one.
    def is_prefix(en: str) -> bool:
        i = bisect.bisect_left(english, en + " ")
        return i < len(english) and english[i].startswith(en + " ")

    return [(en, zh) for en, zh in pairs if not is_prefix(en)]


def synthetic_pair(pairs: list[Pair], k: int) -> Pair:
    """Pair ``k``: real pairs a = k mod M and b = (a + k div M + 1) mod M joined.

    For k < M(M-1), k div M + 1 lies in [1, M-1], so b ≠ a, and (a, b) gives back k. With
    distinct English sentences none of which, followed by a space, starts another, the joined
    English ``en_a + " " + en_b`` splits back into a and b in one way only: distinct pairs.
    """
    m = len(pairs)
    a = k % m
    b = (a + k // m + 1) % m
    return f"{pairs[a][0]} {pairs[b][0]}", pairs[a][1] + pairs[b][1]


def write_corpus(path: Path, pairs: list[Pair], n: int, chunk: int = 50_000) -> None:
    """Writes pairs 0..n-1 as TSV, ``chunk`` lines at a time, checking that the English sides
    are distinct (by a 64-bit hash each: 8 bytes a pair); atomic (a temporary name, renamed)."""
    import numpy as np

    if n > len(pairs) * (len(pairs) - 1):
        raise SystemExit(f"{n:,} pairs: more than {len(pairs):,} real pairs can make distinct")
    hashes = np.empty(n, dtype=np.int64)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for start in range(0, n, chunk):
            lines = [synthetic_pair(pairs, k) for k in range(start, min(n, start + chunk))]
            hashes[start : start + len(lines)] = [hash(en) for en, _ in lines]
            f.write("".join(f"{en}\t{zh}\n" for en, zh in lines))
    hashes.sort()
    if n > 1 and not np.all(hashes[1:] != hashes[:-1]):
        tmp.unlink()
        raise SystemExit(f"{path}: two synthetic pairs share their English (a bug)")
    tmp.rename(path)


def corpus(work: Path, n: int, label: str, max_chars: int) -> Path:
    """The TSV of ``n`` synthetic pairs in ``work``, built unless an earlier run left it."""
    path = work / f"pairs-{n}.tsv"
    if path.is_file():
        say(f"{label} pairs: {path} (built by an earlier run)")
        return path
    base = work / f"base-{max_chars}.tsv"
    if not base.is_file():
        say(f"reading and cleaning the bundled corpus into {base}…")
        rows = base_pairs(max_chars)
        base.with_name(base.name + ".tmp").write_text(
            "".join(f"{en}\t{zh}\n" for en, zh in rows), encoding="utf-8"
        )
        base.with_name(base.name + ".tmp").rename(base)
    lines = base.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: U+2028 & co.
    pairs = [tuple(line.split("\t")) for line in lines]
    say(f"building {label} pairs from {len(pairs):,} real ones…")
    start = time.perf_counter()
    write_corpus(path, pairs, n)  # type: ignore[arg-type]
    say(f"built {path} in {time.perf_counter() - start:.1f} s")
    return path


# ----------------------------------------------------------------------------- /proc
def smaps(pid: int) -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` in bytes (``Rss``, ``Pss``, ``Private_Dirty``, ...); {} if the
    process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    return {m[1]: int(m[2]) * KIB for m in re.finditer(r"^(\w+):\s+(\d+) kB", text, re.M)}


def uss(memory: dict[str, int]) -> int:
    """Unique set size: the pages only this process maps."""
    return memory.get("Private_Clean", 0) + memory.get("Private_Dirty", 0)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from the parent links in ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name, in parentheses, may hold spaces: the fields follow its last ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def tree_memory(pid: int) -> dict[int, dict[str, int]]:
    """``smaps`` of ``pid`` and each of its descendants still there, by process id."""
    found = {p: smaps(p) for p in descendants(pid)}
    return {p: memory for p, memory in found.items() if memory}


def disk_bytes(path: Path) -> int:
    """Sum of the sizes of the files under ``path`` (files vanishing meanwhile count 0)."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                pass
    return total


# ----------------------------------------------------------------------------- the children
def child(mode: str, params: dict[str, Any]) -> None:
    """A child's whole life: one step (``prepare``, ``reload`` or ``rank``), then its result as
    one JSON line on stdout; a rank then waits for its stdin to close, so that both ranks are
    alive while the parent reads their memory."""
    import resource

    import seq2seq
    from seq2seq.data import TranslationDataModule

    kwargs = module_arguments(TranslationDataModule, params)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out: dict[str, Any] = {"seq2seq": seq2seq.__file__, "num_proc": kwargs.get("num_proc"),
                           "startup_cpu": usage.ru_utime + usage.ru_stime,
                           "startup_pss": smaps(os.getpid()).get("Pss", 0)}  # fmt: skip
    datamodule = TranslationDataModule(**kwargs)
    out["num_proc_used"] = getattr(datamodule, "num_proc", None)  # None: no such setting
    if mode == "prepare":
        start = time.perf_counter()
        datamodule.prepare_data()
        out["prepare_s"] = time.perf_counter() - start
    elif mode == "reload":
        out |= reload(datamodule, params)
    else:
        out |= as_rank(datamodule, params)
    print(MARK + json.dumps(out), flush=True)
    if mode == "rank":
        sys.stdin.readline()


def module_arguments(module: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The data module's arguments: the TSV, a cache directory, and ``num_proc`` and
    ``vocab_size`` where given (``num_proc`` only where the constructor takes it)."""
    import inspect

    accepted = inspect.signature(module).parameters
    kwargs = {"corpus": "tsv", "path": params["path"], "cache_dir": params["cache_dir"]}
    for name in ("num_proc", "vocab_size"):
        if params.get(name) is not None and name in accepted:
            kwargs[name] = params[name]
    return kwargs


def reload(datamodule: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``setup()``'s time and the memory it adds; then the training loader's speed."""
    import torch

    before = smaps(os.getpid())
    start = time.perf_counter()
    datamodule.setup("fit")
    setup_s = time.perf_counter() - start
    after = smaps(os.getpid())
    start = time.perf_counter()
    loader = datamodule.train_dataloader()
    build_s = time.perf_counter() - start
    tokens, pairs, seconds = drain(loader, params["batches"], params["seconds"])
    return {"setup_s": setup_s, "uss": uss(after), "pss": after.get("Pss", 0),
            "setup_uss": uss(after) - uss(before), "loader_build_s": build_s,
            "tokens_per_s": tokens / seconds, "tokens_per_pair": tokens / max(pairs, 1),
            "torch_threads": torch.get_num_threads()}  # fmt: skip


def drain(loader: Any, batches: int, seconds: float) -> tuple[int, int, float]:
    """Tokens and pairs of up to ``batches`` batches or ``seconds`` of ``loader``, and the
    seconds they took."""
    tokens = pairs = 0
    start = time.perf_counter()
    for i, batch in enumerate(loader, 1):
        tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
        pairs += len(batch)
        if i >= batches or time.perf_counter() - start >= seconds:
            break
    return tokens, pairs, time.perf_counter() - start


class StandInTrainer:
    """What the data module reads of a trainer to shard its loader (no Trainer here)."""

    def __init__(self, world_size: int, rank: int) -> None:
        self.world_size, self.num_devices, self.num_nodes = world_size, world_size, 1
        self.global_rank = self.local_rank = rank
        self.node_rank = 0


def as_rank(datamodule: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``setup()``, then ``params["batches"]`` batches of the training loader of rank
    ``params["rank"]`` of ``params["world"]``; and the memory before ``setup()``: what grows
    after is the data's, apart from library pages (how private those are depends on what else
    runs on the machine)."""
    before = smaps(os.getpid())
    datamodule.setup("fit")
    datamodule.trainer = StandInTrainer(params["world"], params["rank"])
    tokens, pairs, _ = drain(datamodule.train_dataloader(), params["batches"], float("inf"))
    return {"tokens": tokens, "pairs": pairs, "uss_before": uss(before),
            "pss_before": before.get("Pss", 0)}  # fmt: skip


# ----------------------------------------------------------------------------- the parent side
@dataclass
class Implementation:
    """A ``seq2seq`` checkout the children import (through PYTHONPATH)."""

    name: str
    root: Path
    num_proc: tuple[int | None, int | None] = (-1, -1)  # passed, used (children say); -1: none ran
    torch_threads: int | None = None


@dataclass
class Child:
    """One child process, its directory and what it wrote."""

    proc: subprocess.Popen
    stdout: Path
    stderr: Path
    started: float = field(default_factory=time.perf_counter)

    def result(self) -> dict[str, Any] | None:
        lines = self.stdout.read_text(encoding="utf-8", errors="replace").splitlines()
        found = [line[len(MARK) :] for line in lines if line.startswith(MARK)]
        return json.loads(found[-1]) if found else None

    def tail(self, lines: int = 15) -> str:
        text = self.stderr.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join("    " + line for line in text[-lines:])


def spawn(impl: Implementation, mode: str, params: dict[str, Any], run: Path, tag: str) -> Child:
    """Starts ``child(mode, params)`` in a fresh interpreter importing ``impl``'s package.

    The child runs in ``run`` (``python -c`` puts the working directory first on sys.path, so
    it must hold no ``seq2seq``); its scratch (datasets' cache, temporary files) stays in ``run``.
    """
    for sub in ("hf", "tmp", "logs"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(impl.root), HF_DATASETS_CACHE=str(run / "hf"),
               TMPDIR=str(run / "tmp"), HF_DATASETS_DISABLE_PROGRESS_BARS="1")  # fmt: skip
    if mode == "rank":
        rank = str(params["rank"])
        env |= {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": str(params["world"])}
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import bench_data; "
        f"bench_data.child({mode!r}, {params!r})"
    )
    stdout, stderr = run / "logs" / f"{tag}.out", run / "logs" / f"{tag}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=run, stdout=out,
                                stderr=err, stdin=subprocess.PIPE)  # fmt: skip
    return Child(proc, stdout, stderr)


def kill_tree(pid: int) -> None:
    """SIGKILL to ``pid`` (a child this script started) and everything below it."""
    for p in descendants(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def watch(child_: Child, interval: float, scratch: Path, timeout: float) -> dict[str, Any]:
    """Samples the child's process tree until it exits; its peaks, times and exit status."""
    peak = {"pss": 0, "rss": 0, "procs": 0, "disk": 0}
    next_disk = 0.0
    pid = child_.proc.pid
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        memory = tree_memory(pid)
        peak["pss"] = max(peak["pss"], sum(m.get("Pss", 0) for m in memory.values()))
        peak["rss"] = max([peak["rss"]] + [m.get("Rss", 0) for m in memory.values()])
        peak["procs"] = max(peak["procs"], len(memory))
        if time.perf_counter() >= next_disk:
            peak["disk"] = max(peak["disk"], disk_bytes(scratch))
            next_disk = time.perf_counter() + 1.0
        if time.perf_counter() - child_.started > timeout:
            say(f"  over --timeout {timeout:.0f} s: killing process {pid} and its descendants")
            kill_tree(pid)
        time.sleep(interval)
    child_.proc.returncode = os.waitstatus_to_exitcode(status)
    return peak | {
        "rss": max(peak["rss"], usage.ru_maxrss * KIB),
        "wall": time.perf_counter() - child_.started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rc": child_.proc.returncode,
    }


def outcome(child_: Child, impl: Implementation, step: str) -> dict[str, Any] | None:
    """The child's result, or None after saying why there is none (its stderr tail)."""
    result = child_.result() if child_.proc.returncode == 0 else None
    if result is not None and not Path(result["seq2seq"]).is_relative_to(impl.root):
        say(f"  {step} ({impl.name}) imported {result['seq2seq']}, not {impl.root}")
        return None
    if result is None:
        say(
            f"  {step} ({impl.name}) failed, exit status {child_.proc.returncode}; stderr ends:\n"
            f"{child_.tail()}"
        )
    return result


def prepare(impl: Implementation, params: dict[str, Any], run: Path, args) -> dict | None:
    """Step 1: preparation in a fresh child, watched."""
    child_ = spawn(impl, "prepare", params, run, "prepare")
    peak = watch(child_, args.interval, run, args.timeout)
    result = outcome(child_, impl, "preparing")
    if result is None:
        return None
    impl.num_proc = (result["num_proc"], result.get("num_proc_used"))
    scratch = disk_bytes(run / "hf") + disk_bytes(run / "tmp")
    cache = disk_bytes(Path(params["cache_dir"]))
    return peak | result | {"cpu": peak["cpu"] - result["startup_cpu"], "cache": cache,
                            "scratch": scratch}  # fmt: skip


def reload_step(impl: Implementation, params: dict[str, Any], run: Path, args) -> dict | None:
    """Step 2: ``setup()`` and the loader in a fresh child."""
    params = params | {"batches": args.loader_batches, "seconds": args.loader_seconds}
    child_ = spawn(impl, "reload", params, run, "reload")
    watch(child_, args.interval, run, args.timeout)
    result = outcome(child_, impl, "reloading")
    if result is not None:
        impl.torch_threads = result["torch_threads"]
    return result


def ranks(impl: Implementation, params: dict[str, Any], run: Path, args) -> list | None:
    """Step 3: two ranks at once; their memory read while both hold their batches."""
    ask = [params | {"rank": r, "world": 2, "batches": args.rank_batches} for r in range(2)]
    children = [spawn(impl, "rank", ask[r], run, f"rank{r}") for r in range(2)]
    try:
        while not all(c.result() or c.proc.poll() is not None for c in children):
            if time.perf_counter() - children[0].started > args.timeout:
                break
            time.sleep(0.1)
        results = [c.result() if c.proc.poll() is None else None for c in children]
        memory = [smaps(c.proc.pid) for c in children]
    finally:
        for c in children:
            c.proc.stdin.close()  # type: ignore[union-attr]
            try:
                c.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill_tree(c.proc.pid)
                c.proc.wait()
    if not all(results) or not all(memory):
        for c in children:
            outcome(c, impl, "two ranks")
        return None
    return [
        r | {"uss": uss(m), "pss": m["Pss"], "uss_growth": uss(m) - r["uss_before"],
             "pss_growth": m["Pss"] - r["pss_before"]}
        for m, r in zip(memory, results, strict=True)
    ]  # fmt: skip


def measure(impl: Implementation, tsv: Path, label: str, run: Path, args) -> dict[str, Any]:
    """Steps 1 to 3 for one implementation and size, in ``run`` (emptied first)."""
    shutil.rmtree(run, ignore_errors=True)
    params = {"path": str(tsv), "cache_dir": str(run / "cache"), "num_proc": args.num_proc,
              "vocab_size": args.vocab_size}  # fmt: skip
    row: dict[str, Any] = {}
    say(f"preparing {label} ({impl.name})…")
    row["prepare"] = prepare(impl, params, run, args)
    if row["prepare"] is not None:
        say(f"  prepared in {row['prepare']['prepare_s']:.1f} s; reloading {label} ({impl.name})…")
        row["reload"] = reload_step(impl, params, run, args)
        say(f"  two ranks of {label} ({impl.name})…")
        row["ranks"] = ranks(impl, params, run, args)
    if not args.keep:
        shutil.rmtree(run, ignore_errors=True)
    return row


# ----------------------------------------------------------------------------- the report
def cell(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    """``value / scale`` with ``digits`` decimals and thousands commas; ``failed`` for None."""
    if value is None:
        return "failed"
    return f"{round(value / scale, digits) or 0.0:,.{digits}f}"  # "0", never "-0"


def get(row: dict[str, Any], step: str, key: str) -> float | None:
    """``row[step][key]``; None where the step failed (or never ran)."""
    found = row.get(step)
    return None if found is None else found[key]


# One table column each, after "pairs": header, step, key, unit, decimals. A rank column shows
# both ranks, "rank 0 / rank 1"; a failed step's cells say "failed".
COLUMNS = [
    ("prep wall s", "prepare", "prepare_s", 1, 1), ("prep CPU s", "prepare", "cpu", 1, 1),
    ("peak PSS GiB (tree)", "prepare", "pss", GIB, 3),
    ("peak RSS GiB (1 proc)", "prepare", "rss", GIB, 3), ("procs", "prepare", "procs", 1, 0),
    ("peak disk MB", "prepare", "disk", 1e6, 1), ("cache MB", "prepare", "cache", 1e6, 1),
    ("scratch MB", "prepare", "scratch", 1e6, 1), ("reload s", "reload", "setup_s", 1, 2),
    ("loader build s", "reload", "loader_build_s", 1, 2),
    ("loader tok/s", "reload", "tokens_per_s", 1, 0),
    ("tok/pair", "reload", "tokens_per_pair", 1, 1),
    ("USS after load MiB", "reload", "uss", MIB, 0),
    ("of which setup MiB", "reload", "setup_uss", MIB, 0),
    ("2-rank USS MiB", "ranks", "uss", MIB, 0), ("2-rank PSS MiB", "ranks", "pss", MIB, 0),
    ("2-rank USS growth MiB", "ranks", "uss_growth", MIB, 0),
    ("2-rank PSS growth MiB", "ranks", "pss_growth", MIB, 0),
]  # fmt: skip


def table_row(label: str, row: dict[str, Any]) -> list[str]:
    """One size's cells (see :data:`COLUMNS`)."""
    cells = [label]
    for _, step, key, unit, digits in COLUMNS:
        found = row.get(step)
        if step == "ranks" and found is not None:
            cells.append(" / ".join(cell(rank[key], unit, digits) for rank in found))
        else:
            cells.append(cell(get(row, step, key), unit, digits))
    return cells


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table, numbers right-aligned."""
    rule = ["---"] + ["---:"] * (len(header) - 1)
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, rule, *rows])


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares slope and intercept of ``(x, y)`` points; None under two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def extrapolation(rows: dict[int, dict[str, Any]]) -> str:
    """Peak PSS (GiB) against millions of pairs: the line and its values at 26M and 100M."""
    peaks = {n: get(row, "prepare", "pss") for n, row in rows.items()}
    points = [(n / 1e6, peak / GIB) for n, peak in peaks.items() if peak is not None]
    line = fit_line(points)
    if line is None:
        return "Peak PSS against pairs: n/a (needs two sizes prepared)"
    slope, intercept = line
    at = ", ".join(
        f"{n / 1e6:g}M pairs: {slope * n / 1e6 + intercept:,.1f} GiB" for n in EXTRAPOLATE
    )
    return (
        f"Peak PSS ≈ {slope:.3f} GiB per million pairs + {intercept:.3f} GiB (least squares "
        f"over {len(points)} sizes, {min(x for x, _ in points) * 1e6:,.0f} to "
        f"{max(x for x, _ in points) * 1e6:,.0f} pairs); extrapolated to {at}"
    )


RATIOS = [("prep wall", "prepare", "prepare_s"), ("prep CPU", "prepare", "cpu"),
          ("peak PSS", "prepare", "pss"), ("cache", "prepare", "cache"),
          ("reload", "reload", "setup_s"), ("loader tok/s", "reload", "tokens_per_s")]  # fmt: skip


def ratios(ours: dict[int, dict], peer: dict[int, dict], labels: dict[int, str]) -> str:
    """This checkout's numbers over the peer's, per size."""
    rows = []
    for n, label in labels.items():
        cells = [label]
        for _, step, key in RATIOS:
            a, b = get(ours[n], step, key), get(peer[n], step, key)
            cells.append(f"{a / b:.3f}" if a is not None and b else "n/a")
        rows.append(cells)
    return markdown(["pairs"] + [f"{name} ×" for name, _, _ in RATIOS], rows)


def num_proc_text(passed: int | None, used: int | None) -> str:
    """How many preparation processes the data module was given and took."""
    if passed == used == -1:
        return "n/a (no preparation ran)"
    if used is None:
        return "not a setting of this data module"
    return f"{used}" + (" (passed)" if passed is not None else " (the data module's default)")


def report(
    impls: list[Implementation],
    results: dict[str, dict[int, dict]],
    labels: dict[int, str],
    sizes: dict[int, int],
) -> None:
    """Prints the tables, lines and ratios."""
    print(
        f"CPUs: {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable); "
        f"Python {sys.version.split()[0]}"
    )
    for n, label in labels.items():
        print(
            f"{label}: {n:,} distinct pairs, {sizes[n] / 1e6:,.1f} MB of TSV, "
            f"{sizes[n] / n:.1f} bytes per pair"
        )
    for impl in impls:
        rows = results[impl.name]
        print(f"\n### {impl.name}: {impl.root}")
        print(
            f"num_proc: {num_proc_text(*impl.num_proc)}; "
            f"torch threads in the children: {impl.torch_threads or 'n/a'}"
        )
        prepared = [row["prepare"] for row in rows.values() if row["prepare"]]
        if prepared:
            first = prepared[0]
            print(
                f"child start-up before prepare_data (not in the prep columns): "
                f"{first['wall'] - first['prepare_s']:.1f} s wall, "
                f"{first['startup_cpu']:.1f} s CPU, {first['startup_pss'] / MIB:,.0f} MiB PSS"
            )
        print()
        header = ["pairs"] + [column[0] for column in COLUMNS]
        print(markdown(header, [table_row(labels[n], row) for n, row in rows.items()]))
        print("\n" + extrapolation(rows))
    if len(impls) == 2:
        print(f"\n### {impls[0].name} / {impls[1].name}\n")
        print(ratios(results[impls[0].name], results[impls[1].name], labels))


def arguments() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--sizes",
        type=parse_sizes,
        default="250k,1M,4M",
        help="pair counts, comma-separated: 250k, 1M, 4M, 8M, 20000, ... (default %(default)s)",
    )
    add("--peer", type=Path, help="another checkout, measured alongside")
    add("--num-proc", type=int, help="num_proc, where the data module takes it (default: none)")
    add("--vocab-size", type=int, help="the data module's vocab_size (default: none passed)")
    add(
        "--work",
        type=Path,
        default=Path("/tmp/seq2seq-bench-data"),
        help="keeps the corpora; the caches are built in it (default %(default)s)",
    )
    add("--keep", action="store_true", help="keep each run's cache directory")
    add("--interval", type=float, default=0.2, help="memory sampling period, s (default 0.2)")
    add("--loader-batches", type=int, default=200, help="reload: batches timed, at most")
    add("--loader-seconds", type=float, default=5.0, help="reload: seconds timed, at most")
    add("--rank-batches", type=int, default=50, help="two ranks: batches each takes")
    add("--timeout", type=float, default=6 * 3600, help="seconds a child may run (default 6 h)")
    add(
        "--max-chars",
        type=int,
        default=200,
        help="longest real sentence joined: half of max_len_chars, so no joined pair is too long",
    )
    add("--json", type=Path, help="also write every measurement here")
    return parser.parse_args()


def main() -> None:
    args = arguments()

    labels = args.sizes
    impls = [Implementation("this checkout", ROOT)]
    if args.peer:
        impls.append(Implementation("peer", args.peer.resolve()))
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[int, dict]] = {impl.name: {} for impl in impls}
    sizes = {}
    for n, label in labels.items():
        tsv = corpus(args.work, n, label, args.max_chars)
        sizes[n] = tsv.stat().st_size
        say(f"{label}: {sizes[n] / n:.1f} bytes per pair")
        for i, impl in enumerate(impls):
            results[impl.name][n] = measure(impl, tsv, label, args.work / f"run-{i}-{n}", args)
    report(impls, results, labels, sizes)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "labels": labels}, indent=2))
    if not any(row["prepare"] for rows in results.values() for row in rows.values()):
        raise SystemExit("every preparation failed")


if __name__ == "__main__":
    main()
