"""Speed and memory of our Transformer against Hugging Face ``MarianMTModel``, in one run.

Both models have the shape of ``--config`` (configs/tiny.yaml: d_model 256, 4 heads, 3+3
layers, d_ff 1024, vocabulary 8000, post-LN, relu, tied and scaled embeddings, no dropout);
Marian is built by ``benchmarks.reference.build_marian`` and trained with its
``marian_loss`` (Hugging Face's own forward, projecting every position). Both run fp32 on the
CPU with ``--threads`` threads on the same machine and the same data: batches of the bundled
corpus drawn once, in the parent, and fed to both. Every measurement runs in its own
subprocess (this bench re-invoked with ``--worker``), so that peak memories do not mix.

What each number means (ratio = ours / marian; above 1 is better for us in every row except
memory):

- train tok/s: non-pad source + target tokens per second of forward + backward + gradient
  clipping + AdamW step + schedule step, over the same ``--train-batches`` token batches
  (``max_tokens`` of the config, after ``--warmup`` untimed ones). Ours: ``TranslationModule
  .loss`` (label-smoothed loss projecting only non-pad target positions); Marian:
  ``marian_loss``. Both use our optimizer and schedule
  (``seq2seq.training.schedule.paper_optimizer`` with the config's settings as ``seq2seq fit``
  resolves them; ``benchmarks.train``).
- fit tok/s: what users get: ``seq2seq fit`` (Lightning, our token batching, logging) on a copy
  of the config with ``max_steps = --fit-steps``, no validation, no snapshots, no cooldown,
  logs under OUT/fit. It is our ``ThroughputMonitor``'s ``tok_per_s`` (windows of 10 steps)
  from metrics.csv, aggregated over all windows but the first (warm-up) as total tokens /
  total time. Its ratio is against Marian's bare loop above.
- MFU: model FLOPs per second divided by this machine's fp32 matmul rate, measured in the same
  run: the best of several ``torch.mm`` of two ``--matmul-size`` square fp32 matrices
  (2 n^3 FLOPs each) with the same thread count. Model FLOPs are counted explicitly from each
  sentence's real (non-pad) lengths, per layer (the formula in ``benchmarks/flops.py``), times 3
  for training (the backward pass is twice the forward). Padding, softmax, LayerNorm and the
  optimizer are not counted: both models get credit for the same useful work only.
- greedy / beam5 sent/s and tgt tok/s: ``--decode-sentences`` test sentences (sorted by
  length, batches of ``--decode-batch``, the same batches for both), source encoding included,
  one untimed warm-up batch first. Equal work: every sentence gets exactly 24 decoder steps,
  23 tokens then a forced eos. Ours: ``seq2seq.decoding.search.greedy_search`` /
  ``beam_search`` over a ``TransformerScorer`` whose eos is banned until the length limit (24)
  forces it. Marian: ``generate(min_new_tokens=23, max_new_tokens=24, forced_eos_token_id=eos)``.
  Weights are each model's own random initialisation: with the length fixed, the work does not
  depend on them. Every output's length is checked. Issue reference on this machine (natural
  lengths, not fixed): HF ``generate`` 191 sent/s greedy, 45 beam 5; CTranslate2 367 and 96.
  With ``--checkpoint CKPT`` (a model trained on ``--config``'s data) both decode with the same
  trained weights instead, at natural lengths: ours with ``translate_ids`` and the checkpoint's
  search settings, Marian with ``generate`` on the exact export of those weights
  (``seq2seq.tools.marian_weights.to_marian``) under the same output limit. Greedy outputs are then
  identical, so the work is equal; finished sentences cost us nothing (they leave the batch),
  which fixed lengths hide.
- peak RSS: the worker process's maximum resident set (``os.wait4`` rusage of that child), so
  it includes the libraries each side imports (Marian: transformers). The JSON also has each
  worker's RSS just before its timed loop (``setup_rss_mib``).
- GPU (only when CUDA is present, else skipped): the train measurement again on
  ``cuda`` with bf16 autocast, attention through SDPA (flash / memory-efficient kernels),
  batches of ``--gpu-max-tokens``; MFU against the GPU's dense bf16 peak from
  ``PEAK_BF16_TFLOPS`` (by ``torch.cuda.get_device_name()``).

Run from the repository root (about 6 minutes on 2 idle cores):

    python scripts/bench.py marian                       # the full benchmark, OUT = runs/bench
    python scripts/bench.py marian --quick --out /tmp/b  # smoke test, about a minute
    python scripts/bench.py marian --profile             # also torch.profiler tables in OUT

The inputs (settings.json, train.pt, decode.pt in OUT) are prepared by a worker too, so the
parent stays small: a child's peak RSS as ``wait4`` reports it is at least its parent's RSS
when it was started.

Output: a table on stdout and OUT/results.json. ``--profile`` adds OUT/profile-*.txt, the top
ops of 3 training steps and of one decoding batch of each model; it runs after the timed part
but raises the workers' peak RSS, so do not read memory from a profiled run.

Ratios from one run are comparable; absolute numbers need idle cores. The script prints how
many cores other processes used meanwhile: with 2 threads on 2 busy cores, OpenMP threads wait
for each other at every op and small ops (decoding) slow down by orders of magnitude.

The parts live beside this module (subprocess workers and memory in ``harness``, the config in
``recipe``, Marian in ``reference``, training in ``train``, FLOPs in ``flops``, decoders in
``decoders``, the table in ``report``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.decoders import DECODE_STEPS, SEARCHES, decode_batches, decoder, timed_decoding
from benchmarks.flops import matmul_rate, n_tokens, train_flops
from benchmarks.harness import OtherLoad, finish_worker, run_worker, write_profile
from benchmarks.recipe import fit_config, load_recipe, read_config
from benchmarks.report import bench_rows, print_ratio_table
from benchmarks.train import (
    batch_dicts,
    model_and_loss,
    run_fit,
    timed_steps,
    update_step,
    window_rates,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Training and decoding throughput, MFU and peak memory: ours vs "
        "Hugging Face MarianMTModel as the same model, on the same batches.",
    )
    add = parser.add_argument
    add("--config", default="configs/tiny.yaml", help="model/data config (default tiny)")
    add("--out", default="runs/bench", help="output directory (default runs/bench)")
    add("--threads", type=int, default=2, help="torch CPU threads for everything (default 2)")
    add("--train-batches", type=int, default=40, help="timed training steps (default 40)")
    add("--warmup", type=int, default=3, help="untimed training steps first (default 3)")
    add("--fit-steps", type=int, default=100, help="steps of the seq2seq fit run (default 100)")
    add("--skip-fit", action="store_true", help="do not run seq2seq fit")
    add("--decode-sentences", type=int, default=500, help="test sentences (default 500)")
    add("--decode-batch", type=int, default=64, help="sentences per decode batch (default 64)")
    add("--matmul-size", type=int, default=2048, help="square matmul size (default 2048)")
    add("--gpu-max-tokens", type=int, default=16384, help="GPU batch budget (default 16384)")
    add("--profile", action="store_true", help="also write torch.profiler tables to OUT")
    add("--quick", action="store_true", help="tiny sizes for a smoke test")
    add(
        "--checkpoint",
        help="decode with these trained weights (ours; Marian gets their exact export) at "
        "natural output lengths, instead of random weights at a fixed length",
    )
    # Internal: one measurement in this process (the parent runs these as subprocesses).
    add("--worker", choices=("prepare", "matmul", "train", "decode"), help=argparse.SUPPRESS)
    add("--model", choices=("ours", "marian"), help=argparse.SUPPRESS)
    add("--device", default="cpu", help=argparse.SUPPRESS)
    add("--search", choices=sorted(SEARCHES), help=argparse.SUPPRESS)
    add("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.train_batches, args.warmup, args.fit_steps = 2, 1, 20
        args.decode_sentences, args.decode_batch = 16, 8
        args.matmul_size, args.gpu_max_tokens = 512, 4096
    return args


# -- inputs, prepared once by a worker ----------------------------------------------------------


def worker_prepare(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Writes settings.json (``model``: TranslationModule's arguments as ``seq2seq fit``
    resolves them, without the cooldown, which needs a run length; ``gradient_clip_val``;
    ``checkpoint``) and the batch files every worker reads."""
    from seq2seq.training.callbacks import ThroughputMonitor

    gpu = torch.cuda.is_available()
    recipe = load_recipe(args.config)
    datamodule = recipe.prepared_datamodule()
    model = {**recipe.model, "cooldown_steps": 0}  # no max_steps to anneal towards here
    settings: dict[str, Any] = {"model": model, "gradient_clip_val": recipe.gradient_clip_val}
    if args.checkpoint:
        check_checkpoint_tokenizer(args.checkpoint, datamodule.tokenizer)
        settings["checkpoint"] = str(Path(args.checkpoint).resolve())
    (out / "settings.json").write_text(json.dumps(settings, indent=2))
    n_train = args.warmup + args.train_batches
    torch.save(batch_dicts(datamodule, max(n_train, args.fit_steps)), out / "train.pt")
    sources = datamodule.split_texts("test")[0][: args.decode_sentences]
    limit, pad_id = model["config"]["max_positions"], model["config"]["pad_id"]
    batches = decode_batches(datamodule.tokenizer, sources, limit, args.decode_batch, pad_id)
    torch.save(batches, out / "decode.pt")
    if gpu:
        datamodule.max_tokens = args.gpu_max_tokens  # same cache, bigger batches
        torch.save(batch_dicts(datamodule, n_train), out / "gpu_train.pt")
    return {"throughput_window": ThroughputMonitor().window, "cuda": gpu}


def check_checkpoint_tokenizer(checkpoint: str, tokenizer) -> None:
    """The decode batches are tokenized with the config's data: the checkpoint must share it."""
    from seq2seq.inference.checkpoint import load_model

    stored = load_model(checkpoint).tokenizer
    if stored.to_bytes() != tokenizer.to_bytes():
        raise SystemExit(f"bench.py marian: {checkpoint} was not trained on --config's vocabulary")
    if stored.source_ends_with_eos != tokenizer.source_ends_with_eos:
        raise SystemExit(
            f"bench.py marian: {checkpoint} and --config's data disagree on whether sources "
            "end with </s>"
        )


# -- workers: one measurement per process -----------------------------------------------------


def worker_train(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Timed training steps of one model on the shared batches (CPU fp32, or CUDA bf16)."""
    from seq2seq.data.batching import Batch

    settings = json.loads((out / "settings.json").read_text())
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    records = torch.load(out / ("gpu_train.pt" if gpu else "train.pt"))
    records = records[: args.warmup + args.train_batches]
    batches = [Batch(**record).to(device) for record in records]
    model, loss_fn = model_and_loss(args.model, settings["model"])
    model.to(device).train()
    step = update_step(
        model, loss_fn, settings["model"], settings["gradient_clip_val"], device, amp=gpu
    )
    seconds, setup_rss = timed_steps(step, batches, args.warmup, device)
    timed = records[args.warmup :]
    mc = settings["model"]["config"]
    result = {
        "steps": len(timed),
        "seconds": seconds,
        "tokens": sum(map(n_tokens, timed)),
        "flops": sum(train_flops(record, mc) for record in timed),
        "setup_rss_mib": setup_rss,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if gpu:
        result["device_name"] = torch.cuda.get_device_name(device)
        result["max_gpu_memory_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    if args.profile:
        name = f"profile-train-{args.model}-{device.type}.txt"
        write_profile(lambda: [step(batch) for batch in batches[-3:]], out / name, gpu)
    return result


def worker_decode(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Timed greedy or beam decoding of the shared test batches."""
    settings = json.loads((out / "settings.json").read_text())
    batches = torch.load(out / "decode.pt")
    checkpoint = settings.get("checkpoint")
    decode = decoder(args.model, settings["model"], SEARCHES[args.search], checkpoint)
    lengths, seconds, setup_rss = timed_decoding(decode, batches)
    if not checkpoint and set(lengths) != {DECODE_STEPS}:
        raise SystemExit(
            f"bench.py marian: {args.model} {args.search} output lengths {set(lengths)}"
        )
    if args.profile:
        name = f"profile-decode-{args.model}-{args.search}.txt"
        write_profile(lambda: decode(batches[len(batches) // 2]), out / name, gpu=False)
    return {
        "sentences": len(lengths),
        "tokens": sum(lengths),
        "seconds": seconds,
        "setup_rss_mib": setup_rss,
    }


WORKERS = {
    "prepare": worker_prepare,
    "matmul": lambda args, out: matmul_rate(args.matmul_size),
    "train": worker_train,
    "decode": worker_decode,
}


# -- the parent: run each worker, then the fit ---------------------------------------------------


def measure(
    args: argparse.Namespace, out: Path, name: str, *worker_args: str, title: str = ""
) -> dict:
    """Runs this bench as a ``--worker`` subprocess; its JSON result plus peak RSS."""
    arguments = [*worker_args, "--out", str(out), "--threads", str(args.threads)]
    arguments += ["--config", args.config, "--warmup", str(args.warmup)]
    arguments += ["--train-batches", str(args.train_batches), "--fit-steps", str(args.fit_steps)]
    arguments += ["--decode-sentences", str(args.decode_sentences)]
    arguments += ["--decode-batch", str(args.decode_batch)]
    arguments += ["--matmul-size", str(args.matmul_size)]
    arguments += ["--gpu-max-tokens", str(args.gpu_max_tokens)]
    arguments += ["--checkpoint", args.checkpoint] if args.checkpoint else []
    arguments += ["--profile"] if args.profile else []
    print(f"== {title or name}", flush=True)
    return run_worker("marian", out / f"worker-{name}.json", arguments, args.threads)


def measure_fit(args: argparse.Namespace, out: Path, mc: dict, window: int) -> dict[str, Any]:
    """``seq2seq fit`` for --fit-steps; throughput from its ThroughputMonitor windows of
    ``window`` steps."""
    fit_dir = out / "fit"
    shutil.rmtree(fit_dir, ignore_errors=True)
    fit_dir.mkdir(parents=True)
    trainer = {"max_steps": args.fit_steps, "limit_val_batches": 0, "log_every_n_steps": 1}
    config = fit_config(read_config(args.config), fit_dir, trainer, model={"cooldown_steps": 0})
    command, peak = run_fit(config, fit_dir, args.threads, log=fit_dir / "fit.log")
    rates = window_rates(fit_dir / "logs" / "version_0" / "metrics.csv", args.fit_steps, window)
    if not rates:
        raise SystemExit(
            f"bench.py marian: no tok_per_s in {fit_dir}/logs (fewer steps than a window?)"
        )
    # Window i covers batches [i*w, (i+1)*w) of epoch 0, the same ones train.pt starts with.
    records = torch.load(out / "train.pt")
    used = range(1, len(rates)) if len(rates) > 1 else range(1)
    tokens = seconds = flops = 0.0
    for i in used:
        chunk = records[i * window : (i + 1) * window]
        chunk_tokens = sum(map(n_tokens, chunk))
        tokens += chunk_tokens
        seconds += chunk_tokens / rates[i]
        flops += sum(train_flops(record, mc) for record in chunk)
    return {
        "steps": args.fit_steps,
        "windows": rates,
        "windows_used": len(used),
        "tokens": tokens,
        "seconds": seconds,
        "flops": flops,
        "peak_rss_mib": peak,
        "command": command,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    if args.worker:
        finish_worker(lambda: WORKERS[args.worker](args, out), args.result, args.threads)
        return 0
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load = OtherLoad()
    prepared = measure(
        args, out, "prepare", "--worker", "prepare", title=f"preparing inputs in {out}"
    )
    mc = json.loads((out / "settings.json").read_text())["model"]["config"]
    results = measure_all(args, out, mc, prepared)
    print()
    rows = print_ratio_table(bench_rows(results, results["matmul"]["best_flops_per_s"]))
    print_settings(args, results)
    elapsed = time.perf_counter() - started
    others = load.cores(elapsed)
    print(
        f"other processes used {others:.2f} of {os.cpu_count()} cores on average during this run"
        + (" (timings perturbed)" if others > 0.1 else "")
    )
    summary = {
        "arguments": {k: v for k, v in vars(args).items() if k not in ("worker", "result")},
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "decode_steps": DECODE_STEPS,
        "model_config": mc,
        "table": rows,
        "results": results,
        "seconds": elapsed,
        "other_processes_cores": others,
        "cpu_count": os.cpu_count(),
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"results: {out / 'results.json'} ({elapsed:.0f} s)")
    return 0


def measure_all(
    args: argparse.Namespace, out: Path, mc: dict, prepared: dict[str, Any]
) -> dict[str, Any]:
    """Every measurement after the inputs are prepared, each in its own worker: the matmul
    rate, training, each search, ``seq2seq fit`` (unless skipped) and the GPU (if any)."""
    results: dict[str, Any] = {"matmul": measure(args, out, "matmul", "--worker", "matmul")}
    results["train"] = {
        m: measure(args, out, f"train-{m}", "--worker", "train", "--model", m)
        for m in ("ours", "marian")
    }
    for search in SEARCHES:
        results[search] = {
            m: measure(
                args, out, f"{search}-{m}", "--worker", "decode", "--model", m, "--search", search
            )
            for m in ("ours", "marian")
        }
    if not args.skip_fit:
        results["fit"] = measure_fit(args, out, mc, prepared["throughput_window"])
    if prepared["cuda"]:
        results["gpu"] = {
            m: measure(
                args, out, f"gpu-train-{m}", "--worker", "train", "--model", m, "--device", "cuda"
            )
            for m in ("ours", "marian")
        }
    else:
        print("== GPU section skipped: no CUDA device", flush=True)
    return results


def print_settings(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """What the table's numbers rest on: the matmul rate (MFU's denominator) and the decoding."""
    matmul = results["matmul"]
    print(
        f"\nfp32 matmul {matmul['size']}x{matmul['size']}, {args.threads} threads: "
        f"{matmul['best_flops_per_s'] / 1e9:.1f} GFLOP/s best (MFU denominator), "
        f"{matmul['median_flops_per_s'] / 1e9:.1f} median of {matmul['repeats']}"
    )
    lengths = (
        f"the trained weights of {args.checkpoint} (Marian: their export), natural lengths"
        if args.checkpoint
        else f"{DECODE_STEPS} steps per sentence for both"
    )
    print(
        f"decoding: {lengths}, "
        f"{results['greedy']['ours']['sentences']} sentences in batches of {args.decode_batch}; "
        "issue reference (natural lengths): HF generate 191 / 45 sent/s greedy / beam 5, "
        "CTranslate2 367 / 96"
    )
