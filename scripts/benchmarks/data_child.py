"""The ``data`` bench's child processes: one step each (prepare, reload or one rank of two) on a
data module of whichever ``seq2seq`` is on PYTHONPATH, its result printed as one line."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from benchmarks.proc_memory import smaps, uss

MARK = "BENCH_DATA "  # starts the one result line a child prints on stdout


def child(mode: str, params: dict[str, Any]) -> None:
    """A child's whole life: one step (``prepare``, ``reload`` or ``rank``), then its result as
    one JSON line on stdout; a rank then waits for its stdin to close, so that both ranks are
    alive while the parent reads their memory."""
    import resource

    import seq2seq
    from seq2seq.data import TranslationDataModule

    kwargs = module_arguments(TranslationDataModule, params)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out: dict[str, Any] = {
        "seq2seq": seq2seq.__file__,
        "num_proc": kwargs.get("num_proc"),
        "startup_cpu": usage.ru_utime + usage.ru_stime,
        "startup_pss": smaps(os.getpid()).get("Pss", 0),
    }
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
    """The data module's arguments: the TSV, a cache directory, and ``num_proc``,
    ``vocab_size`` and ``modifiers`` where given (only where the constructor takes them)."""
    import inspect

    accepted = inspect.signature(module).parameters
    kwargs = {"corpus": "tsv", "path": params["path"], "cache_dir": params["cache_dir"]}
    for name in ("num_proc", "vocab_size", "modifiers"):
        if params.get(name) is None:
            continue
        if name in accepted:
            kwargs[name] = params[name]
        elif name == "modifiers":  # a peer from before them: say that it measures less work
            print("bench_data: this checkout's data module takes no modifiers", file=sys.stderr)
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
    return {
        "setup_s": setup_s,
        "uss": uss(after),
        "pss": after.get("Pss", 0),
        "setup_uss": uss(after) - uss(before),
        "loader_build_s": build_s,
        "tokens_per_s": tokens / seconds,
        "tokens_per_pair": tokens / max(pairs, 1),
        "torch_threads": torch.get_num_threads(),
    }


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
    return {
        "tokens": tokens,
        "pairs": pairs,
        "uss_before": uss(before),
        "pss_before": before.get("Pss", 0),
    }
