"""Data preparation at scale: the memory, time and disk that ``prepare_data`` takes for N pairs,
then reloading the cache, the loader's speed and each DDP rank's private memory.

    python scripts/bench.py data --sizes 250k,1M,4M
    python scripts/bench.py data --sizes 5000,20000 --peer /tmp/peer --num-proc 2

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

This module is the parent: it spawns and watches the children. The rest lives beside it:
``data_corpus`` (the synthetic pairs), ``data_child`` (a child's one
step), ``proc_memory`` (memory and disk from ``/proc``) and ``data_report`` (the tables).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.data_child import MARK
from benchmarks.data_corpus import corpus
from benchmarks.data_report import report
from benchmarks.harness import progress
from benchmarks.proc_memory import KIB, disk_bytes, kill_tree, smaps, tree_memory, uss

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {"k": 1_000, "m": 1_000_000}
say = progress("bench_data", clock=7)  # a progress line, with the seconds since the start


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
    it must hold no ``seq2seq``) and finds ``benchmarks`` in ``scripts/`` through PYTHONPATH,
    after ``impl``'s package; its scratch (datasets' cache, temporary files) stays in ``run``.
    """
    for sub in ("hf", "tmp", "logs"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        # After the measured package, whatever the environment already puts on the path (an
        # install into a --target folder, say), so that the child imports what we do.
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(impl.root), str(ROOT / "scripts"), os.environ.get("PYTHONPATH")])
        ),
        HF_DATASETS_CACHE=str(run / "hf"),
        TMPDIR=str(run / "tmp"),
        HF_DATASETS_DISABLE_PROGRESS_BARS="1",
    )
    if mode == "rank":
        rank = str(params["rank"])
        env |= {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": str(params["world"])}
    code = f"from benchmarks.data_child import child; child({mode!r}, {params!r})"
    stdout, stderr = run / "logs" / f"{tag}.out", run / "logs" / f"{tag}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            cwd=run,
            stdout=out,
            stderr=err,
            stdin=subprocess.PIPE,
        )
    return Child(proc, stdout, stderr)


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
    return (
        peak
        | result
        | {"cpu": peak["cpu"] - result["startup_cpu"], "cache": cache, "scratch": scratch}
    )


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
        r
        | {
            "uss": uss(m),
            "pss": m["Pss"],
            "uss_growth": uss(m) - r["uss_before"],
            "pss_growth": m["Pss"] - r["pss_before"],
        }
        for m, r in zip(memory, results, strict=True)
    ]


def measure(impl: Implementation, tsv: Path, label: str, run: Path, args) -> dict[str, Any]:
    """Steps 1 to 3 for one implementation and size, in ``run`` (emptied first)."""
    shutil.rmtree(run, ignore_errors=True)
    params = {
        "path": str(tsv),
        "cache_dir": str(run / "cache"),
        "num_proc": args.num_proc,
        "vocab_size": args.vocab_size,
        "modifiers": args.modifiers,
    }
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


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``argv``, else ``sys.argv``'s)."""
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
        "--modifiers",
        type=json.loads,
        help='the data module\'s modifiers, as JSON: \'{"terms": 0.5, "aligned_terms": 2000}\' '
        "(default: none)",
    )
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.modifiers and args.modifiers.get("termbase"):  # the children run elsewhere
        args.modifiers["termbase"] = str(Path(args.modifiers["termbase"]).resolve())
    labels = args.sizes
    impls = [Implementation("this checkout", ROOT)]
    if args.peer:
        impls.append(Implementation("peer", args.peer.resolve()))
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[int, dict]] = {impl.name: {} for impl in impls}
    sizes = {}
    for n, label in labels.items():
        tsv = corpus(args.work, n, label, args.max_chars, say)
        sizes[n] = tsv.stat().st_size
        say(f"{label}: {sizes[n] / n:.1f} bytes per pair")
        for i, impl in enumerate(impls):
            results[impl.name][n] = measure(impl, tsv, label, args.work / f"run-{i}-{n}", args)
    report(impls, results, labels, sizes)
    if args.json:
        measured = {"results": results, "labels": labels, "modifiers": args.modifiers}
        args.json.write_text(json.dumps(measured, indent=2))
    if not any(row["prepare"] for rows in results.values() for row in rows.values()):
        raise SystemExit("every preparation failed")
