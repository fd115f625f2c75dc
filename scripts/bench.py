"""Speed and memory of our Transformer against Hugging Face ``MarianMTModel``, in one run.

Both models have the shape of ``--config`` (configs/tiny.yaml: d_model 256, 4 heads, 3+3
layers, d_ff 1024, vocabulary 8000, post-LN, relu, tied and scaled embeddings, dropout 0.1);
Marian is built by ``scripts/compare_marian.py``'s ``build_marian`` and trained with its
``marian_loss`` (Hugging Face's own forward, projecting every position). Both run fp32 on the
CPU with ``--threads`` threads on the same machine and the same data: batches of the bundled
corpus drawn once, in the parent, and fed to both. Every measurement runs in its own
subprocess (this script re-invoked with ``--worker``), so that peak memories do not mix.

What each number means (ratio = ours / marian; above 1 is better for us in every row except
memory):

- train tok/s: non-pad source + target tokens per second of forward + backward + gradient
  clipping + AdamW step + schedule step, over the same ``--train-batches`` token batches
  (``max_tokens`` of the config, after ``--warmup`` untimed ones). Ours: ``TranslationModule
  .loss`` (label-smoothed loss projecting only non-pad target positions); Marian:
  ``marian_loss``. Both use our optimizer and schedule (``compare_marian.recipe_optimizer``).
- fit tok/s: what users get: ``seq2seq fit`` (Lightning, our token batching, logging) on a copy
  of the config with ``max_steps = --fit-steps``, no validation, no snapshots, no cooldown,
  logs under OUT/fit. It is our ``ThroughputMonitor``'s ``tok_per_s`` (windows of 10 steps)
  from metrics.csv, aggregated over all windows but the first (warm-up) as total tokens /
  total time. Its ratio is against Marian's bare loop above.
- MFU: model FLOPs per second divided by this machine's fp32 matmul rate, measured in the same
  run: the best of several ``torch.mm`` of two ``--matmul-size`` square fp32 matrices
  (2 n^3 FLOPs each) with the same thread count. Model FLOPs are counted explicitly from each
  sentence's real (non-pad) lengths S (source) and T (target, eos included), per layer:
    encoder  S (8 d^2 + 4 d f) + 4 S^2 d
    decoder  T (12 d^2 + 4 d f) + 4 S d^2 + 4 d T (T + 1) / 2 + 4 T S d
    output   2 T d V
  (d = d_model, f = d_ff, V = vocabulary; the decoder's 4 S d^2 projects the memory into
  cross-attention keys/values; causal self-attention counts only the visible pairs), times 3
  for training (the backward pass is twice the forward). Padding, softmax, LayerNorm and the
  optimizer are not counted: both models get credit for the same useful work only.
- greedy / beam5 sent/s and tgt tok/s: ``--decode-sentences`` test sentences (sorted by
  length, batches of ``--decode-batch``, the same batches for both), source encoding included,
  one untimed warm-up batch first. Equal work: every sentence gets exactly 24 decoder steps,
  23 tokens then a forced eos. Ours: ``seq2seq.search.greedy_search`` / ``beam_search`` over a
  ``TransformerScorer`` whose eos is banned until the length limit (24) forces it. Marian:
  ``generate(min_new_tokens=23, max_new_tokens=24, forced_eos_token_id=eos)``. Weights are
  each model's own random initialisation: with the length fixed, the work does not depend on
  them. Every output's length is checked. Issue reference on this machine (natural lengths,
  not fixed): HF ``generate`` 191 sent/s greedy, 45 beam 5; CTranslate2 367 and 96.
  With ``--checkpoint CKPT`` (a model trained on ``--config``'s data) both decode with the same
  trained weights instead, at natural lengths: ours with ``translate_ids`` and the checkpoint's
  search settings, Marian with ``generate`` on the exact export of those weights
  (``seq2seq.export.to_marian``) under the same output limit. Greedy outputs are then
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

    python scripts/bench.py                          # the full benchmark, OUT = runs/bench
    python scripts/bench.py --quick --out /tmp/b     # smoke test, about a minute
    python scripts/bench.py --profile                # also torch.profiler tables in OUT

Output: a table on stdout and OUT/results.json. ``--profile`` adds OUT/profile-*.txt, the top
ops of 3 training steps and of one decoding batch of each model; it runs after the timed part
but raises the workers' peak RSS, so do not read memory from a profiled run.

Ratios from one run are comparable; absolute numbers need idle cores. The script prints how
many cores other processes used meanwhile: with 2 threads on 2 busy cores, OpenMP threads wait
for each other at every op and small ops (decoding) slow down by orders of magnitude.
"""

from __future__ import annotations

import argparse
import copy
import csv
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))  # compare_marian, when run as a script or imported

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3  # seq2seq.data.tokenizer's fixed special ids
DECODE_STEPS = 24  # decoder steps per sentence: 23 tokens, then the forced eos
SEARCHES = {"greedy": 1, "beam5": 5}
# Dense bf16 tensor-core peaks (TFLOP/s), first matching substring of the device name wins.
PEAK_BF16_TFLOPS = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
]


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
    add("--worker", choices=("matmul", "train", "decode"), help=argparse.SUPPRESS)
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


# -- FLOPs ------------------------------------------------------------------------------------


def forward_flops(src_lens: list[int], tgt_lens: list[int], mc: dict[str, Any]) -> int:
    """Forward matmul FLOPs of a batch from real lengths (the formula in the docstring)."""
    d, f, vocab = mc["d_model"], mc["d_ff"], mc["vocab_size"]
    total = 0
    for s, t in zip(src_lens, tgt_lens, strict=True):
        encoder = s * (8 * d * d + 4 * d * f) + 4 * s * s * d
        decoder = t * (12 * d * d + 4 * d * f) + 4 * s * d * d + 2 * d * t * (t + 1) + 4 * t * s * d
        total += mc["n_encoder_layers"] * encoder + mc["n_decoder_layers"] * decoder
        total += 2 * t * d * vocab
    return total


def train_flops(batch: dict[str, Any], mc: dict[str, Any]) -> int:
    """Forward + backward FLOPs of one training batch: 3 x forward."""
    src_lens = (batch["src"] != PAD_ID).sum(dim=1).tolist()
    tgt_lens = (batch["tgt_out"] != PAD_ID).sum(dim=1).tolist()
    return 3 * forward_flops(src_lens, tgt_lens, mc)


def n_tokens(batch: dict[str, Any]) -> int:
    return int(batch["n_src_tokens"]) + int(batch["n_tgt_tokens"])


def peak_bf16_flops(device_name: str) -> float | None:
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in device_name:
            return tflops * 1e12
    return None


# -- inputs, prepared once by the parent --------------------------------------------------------


def load_settings(config_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the YAML config, TranslationModule settings) as ``compare_marian`` reads them."""
    from compare_marian import load_config, model_settings

    config = load_config(config_path)
    settings = model_settings(config)
    settings["cooldown_steps"] = 0  # no max_steps to anneal towards here
    return config, settings


def batch_dicts(datamodule, count: int) -> list[dict]:
    """The first ``count`` training batches of epoch 0, as Lightning's fit would see them."""
    loader = datamodule.train_dataloader()
    loader.set_epoch(0)
    batches = itertools.cycle(loader) if count > len(loader) else loader
    return [vars(batch).copy() for batch in itertools.islice(batches, count)]


def decode_batches(datamodule, limit: int, n_sentences: int, batch_size: int) -> list:
    """Test sources, tokenized as our Translator does, sorted by length, right-padded."""
    from seq2seq.data.clean import normalize_en

    sources = datamodule.split_texts("test")[0][:n_sentences]
    encoded = [datamodule.tokenizer.encode(normalize_en(line))[:limit] for line in sources]
    encoded = sorted((ids for ids in encoded if ids), key=len, reverse=True)
    return [right_pad(encoded[i : i + batch_size]) for i in range(0, len(encoded), batch_size)]


def check_checkpoint_tokenizer(checkpoint: str, tokenizer) -> None:
    """The decode batches are tokenized with the config's data: the checkpoint must share it."""
    from seq2seq.translator import load_model

    if load_model(checkpoint).tokenizer.to_bytes() != tokenizer.to_bytes():
        raise SystemExit(f"bench.py: {checkpoint} was not trained on --config's vocabulary")


def right_pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def prepare_inputs(args: argparse.Namespace, out: Path, gpu: bool) -> dict[str, Any]:
    """Writes settings.json and the batch files every worker reads; returns the settings."""
    from compare_marian import make_datamodule

    config, settings = load_settings(args.config)
    datamodule = make_datamodule(config)
    settings["config"]["vocab_size"] = datamodule.tokenizer.vocab_size
    settings["gradient_clip_val"] = float(config["trainer"].get("gradient_clip_val") or 0.0)
    (out / "settings.json").write_text(json.dumps(settings, indent=2))
    n_train = args.warmup + args.train_batches
    torch.save(batch_dicts(datamodule, max(n_train, args.fit_steps)), out / "train.pt")
    limit = settings["config"]["max_positions"]
    if args.checkpoint:
        check_checkpoint_tokenizer(args.checkpoint, datamodule.tokenizer)
        settings["checkpoint"] = str(Path(args.checkpoint).resolve())
        (out / "settings.json").write_text(json.dumps(settings, indent=2))
    sources = decode_batches(datamodule, limit, args.decode_sentences, args.decode_batch)
    torch.save(sources, out / "decode.pt")
    if gpu:
        datamodule.max_tokens = args.gpu_max_tokens  # same cache, bigger batches
        torch.save(batch_dicts(datamodule, n_train), out / "gpu_train.pt")
    return settings


# -- workers: one measurement per process -----------------------------------------------------


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


def rss_mib() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def worker_matmul(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """fp32 ``torch.mm`` rate: best and median of repeated n x n products."""
    n = args.matmul_size
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        torch.mm(a, b)
    times: list[float] = []
    deadline = time.perf_counter() + 3.0
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 50):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    flops = 2 * n**3
    return {
        "size": n,
        "repeats": len(times),
        "best_flops_per_s": flops / min(times),
        "median_flops_per_s": flops / statistics.median(times),
    }


def ours_train_step(settings: dict[str, Any], device: torch.device, amp: bool):
    """(model, step(batch)) for our TranslationModule."""
    from seq2seq.config import ModelConfig
    from seq2seq.search import SearchConfig
    from seq2seq.training import TranslationModule

    hparams = {k: v for k, v in settings.items() if k not in ("config", "search", "checkpoint")}
    hparams.pop("gradient_clip_val")
    module = TranslationModule(
        ModelConfig(**settings["config"]), search=SearchConfig(**settings["search"]), **hparams
    )
    module.to(device).train()
    return module, make_step(module, lambda batch: module.loss(batch)[0], settings, device, amp)


def marian_train_step(settings: dict[str, Any], device: torch.device, amp: bool):
    """(model, step(batch)) for MarianMTModel with Hugging Face's forward."""
    from compare_marian import build_marian, marian_loss

    model = build_marian(settings, settings["config"]["vocab_size"]).to(device).train()
    smoothing = settings["label_smoothing"]
    return model, make_step(
        model, lambda batch: marian_loss(model, batch, smoothing), settings, device, amp
    )


def make_step(model, loss_fn: Callable, settings: dict[str, Any], device, amp: bool) -> Callable:
    """One optimizer update: forward, backward, clipping, AdamW and schedule steps."""
    from compare_marian import recipe_optimizer, trainable_parameters

    params = trainable_parameters(model)
    optimizer, scheduler = recipe_optimizer(params, settings, max_steps=-1)
    clip = settings["gradient_clip_val"]

    def step(batch) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        scheduler.step()

    return step


def worker_train(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Timed training steps of one model on the shared batches (CPU fp32, or CUDA bf16)."""
    from seq2seq.data.batching import Batch

    settings = json.loads((out / "settings.json").read_text())
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    records = torch.load(out / ("gpu_train.pt" if gpu else "train.pt"))
    records = records[: args.warmup + args.train_batches]
    batches = [Batch(**record).to(device) for record in records]
    build = ours_train_step if args.model == "ours" else marian_train_step
    model, step = build(settings, device, amp=gpu)
    for batch in batches[: args.warmup]:
        step(batch)
    synchronize(device)
    setup_rss = rss_mib()
    start = time.perf_counter()
    for batch in batches[args.warmup :]:
        step(batch)
    synchronize(device)
    seconds = time.perf_counter() - start
    timed = records[args.warmup :]
    result = {
        "steps": len(timed),
        "seconds": seconds,
        "tokens": sum(map(n_tokens, timed)),
        "flops": sum(train_flops(record, settings["config"]) for record in timed),
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


class FixedLengthScorer:
    """Wraps a Scorer to ban eos until the search's length limit forces it: fixed-length work."""

    def __init__(self, scorer, length: int, eos_id: int) -> None:
        self.scorer, self.length, self.eos_id = scorer, length, eos_id
        self.calls = 0

    def __call__(self, last_tokens: torch.Tensor) -> torch.Tensor:
        log_probs = self.scorer(last_tokens)
        self.calls += 1
        if self.calls < self.length:
            log_probs[:, self.eos_id] = float("-inf")
        return log_probs

    def reorder(self, index: torch.Tensor) -> None:
        self.scorer.reorder(index)


def ours_decoder(settings: dict[str, Any], beam: int) -> Callable:
    """decode(src) -> output lengths (eos included), our search on our model."""
    from seq2seq.config import ModelConfig
    from seq2seq.model import Transformer
    from seq2seq.packing import pack_for_cpu_inference
    from seq2seq.search import SearchConfig, TransformerScorer, beam_search, greedy_search

    if settings.get("checkpoint"):
        return trained_ours_decoder(settings["checkpoint"], beam)
    model = pack_for_cpu_inference(Transformer(ModelConfig(**settings["config"])).eval())
    config = SearchConfig(**settings["search"], bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID)

    @torch.inference_mode()  # as translate_ids
    def decode(src: torch.Tensor) -> list[int]:
        max_lens = torch.full((src.shape[0],), DECODE_STEPS)
        scorer = TransformerScorer(model, src, beam, DECODE_STEPS)
        scorer = FixedLengthScorer(scorer, DECODE_STEPS, EOS_ID)
        if beam == 1:
            best = greedy_search(scorer, max_lens, config)
        else:
            best = [hyps[0] for hyps in beam_search(scorer, max_lens, beam, config)]
        return [len(hyp.tokens) + 1 for hyp in best]

    return decode


def trained_ours_decoder(checkpoint: str, beam: int) -> Callable:
    """decode(src) -> output lengths: ``translate_ids`` with the checkpoint's search settings."""
    from seq2seq.packing import pack_for_cpu_inference
    from seq2seq.search import translate_ids
    from seq2seq.translator import load_model

    loaded = load_model(checkpoint)
    model = pack_for_cpu_inference(loaded.model)  # as Translator decodes

    def decode(src: torch.Tensor) -> list[int]:
        hyps = translate_ids(model, src, beam, loaded.search)
        return [len(h[0].tokens) + 1 for h in hyps]

    return decode


def marian_decoder(settings: dict[str, Any], beam: int) -> Callable:
    """decode(src) -> output lengths (eos included), ``MarianMTModel.generate``."""
    from compare_marian import build_marian

    if settings.get("checkpoint"):
        return trained_marian_decoder(settings["checkpoint"], beam)
    model = build_marian(settings, settings["config"]["vocab_size"]).eval()
    beam_options = {}
    if beam > 1:  # generate warns about them in greedy mode
        beam_options = {"length_penalty": settings["search"]["length_penalty"]}
        beam_options["early_stopping"] = True

    @torch.no_grad()
    def decode(src: torch.Tensor) -> list[int]:
        generated = model.generate(
            input_ids=src,
            attention_mask=(src != PAD_ID).long(),
            num_beams=beam,
            do_sample=False,
            min_new_tokens=DECODE_STEPS - 1,
            max_new_tokens=DECODE_STEPS,
            forced_eos_token_id=EOS_ID,
            suppress_tokens=[PAD_ID, UNK_ID, BOS_ID],
            **beam_options,
        )
        rows = generated[:, 1:].tolist()  # without the decoder start token
        return [row.index(EOS_ID) + 1 if EOS_ID in row else len(row) for row in rows]

    return decode


def trained_marian_decoder(checkpoint: str, beam: int) -> Callable:
    """decode(src) -> output lengths: ``generate`` on the exact MarianMTModel export of the
    checkpoint, with our output limit (a * source length + b, eos forced at it; one limit per
    batch, the longest source's) and length penalty alpha (HF applies it as length^alpha)."""
    from seq2seq.export import to_marian
    from seq2seq.translator import load_model

    loaded = load_model(checkpoint)
    model, search = to_marian(loaded.model), loaded.search
    beam_options = {"length_penalty": search.length_penalty, "early_stopping": True}

    @torch.no_grad()
    def decode(src: torch.Tensor) -> list[int]:
        longest = int((src != PAD_ID).sum(dim=1).max())
        limit = int(longest * search.max_len_a) + search.max_len_b
        generated = model.generate(
            input_ids=src,
            attention_mask=(src != PAD_ID).long(),
            num_beams=beam,
            do_sample=False,
            max_length=limit + 1,  # + the decoder start token
            min_new_tokens=1,  # our search's rules: no empty output, no pad, unk or bos
            forced_eos_token_id=EOS_ID,
            suppress_tokens=[PAD_ID, UNK_ID, BOS_ID],
            **(beam_options if beam > 1 else {}),
        )
        rows = generated[:, 1:].tolist()
        return [row.index(EOS_ID) + 1 if EOS_ID in row else len(row) for row in rows]

    return decode


def worker_decode(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Timed greedy or beam decoding of the shared test batches, fixed output length."""
    settings = json.loads((out / "settings.json").read_text())
    batches = torch.load(out / "decode.pt")
    beam = SEARCHES[args.search]
    decode = (ours_decoder if args.model == "ours" else marian_decoder)(settings, beam)
    decode(batches[0])  # warm-up
    setup_rss = rss_mib()
    lengths: list[int] = []
    start = time.perf_counter()
    for src in batches:
        lengths += decode(src)
    seconds = time.perf_counter() - start
    if not settings.get("checkpoint") and set(lengths) != {DECODE_STEPS}:
        raise SystemExit(f"bench.py: {args.model} {args.search} output lengths {set(lengths)}")
    if args.profile:
        name = f"profile-decode-{args.model}-{args.search}.txt"
        write_profile(lambda: decode(batches[len(batches) // 2]), out / name, gpu=False)
    return {
        "sentences": len(lengths),
        "tokens": sum(lengths),
        "seconds": seconds,
        "setup_rss_mib": setup_rss,
    }


def write_profile(fn: Callable[[], Any], path: Path, gpu: bool) -> None:
    """torch.profiler over one call of ``fn``: the top ops by self time, to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        fn()
    sort = "self_device_time_total" if gpu else "self_cpu_time_total"
    path.write_text(prof.key_averages().table(sort_by=sort, row_limit=40, max_name_column_width=60))


def run_worker(args: argparse.Namespace, out: Path) -> None:
    torch.set_num_threads(args.threads)
    measure = {"matmul": worker_matmul, "train": worker_train, "decode": worker_decode}
    result = measure[args.worker](args, out)
    result["threads"] = torch.get_num_threads()
    Path(args.result).write_text(json.dumps(result, indent=2))


# -- the parent: run each worker, then the fit ---------------------------------------------------


def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    return env


def run_measured(command: list[str], env: dict[str, str], log: Path | None = None) -> float:
    """Runs ``command`` to completion; returns its peak RSS in MiB (its own rusage)."""
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
        raise SystemExit(f"bench.py: {' '.join(command)} failed ({process.returncode}){where}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def measure(args: argparse.Namespace, out: Path, name: str, *worker_args: str) -> dict:
    """Runs this script as a ``--worker`` subprocess; its JSON result plus peak RSS."""
    result_path = out / f"worker-{name}.json"
    command = [sys.executable, str(Path(__file__).resolve()), *worker_args]
    command += ["--result", str(result_path), "--out", str(out), "--threads", str(args.threads)]
    command += ["--config", args.config, "--warmup", str(args.warmup)]
    command += ["--train-batches", str(args.train_batches), "--matmul-size", str(args.matmul_size)]
    command += ["--profile"] if args.profile else []
    print(f"== {name}", flush=True)
    peak = run_measured(command, thread_env(args.threads))
    result = json.loads(result_path.read_text())
    result["peak_rss_mib"] = peak
    return result


def fit_config(config: dict[str, Any], out: Path, steps: int) -> dict[str, Any]:
    """The config with ``steps`` updates, no validation/snapshots/cooldown, logs under out."""
    config = copy.deepcopy(config)
    config["model"]["cooldown_steps"] = 0
    trainer = config.setdefault("trainer", {})
    trainer.update(max_steps=steps, limit_val_batches=0, callbacks=[], log_every_n_steps=1)
    trainer["logger"] = {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": str(out), "name": "logs"},
    }
    trainer["default_root_dir"] = str(out)
    config.setdefault("checkpoint", {})["dirpath"] = str(out / "checkpoints")
    return config


def window_rates(metrics_csv: Path, steps: int) -> list[float]:
    """ThroughputMonitor's tok_per_s of each full window, in order.

    The monitor logs once per window, at the window's last batch (0-based step w-1, 2w-1, ...);
    with ``log_every_n_steps=1`` the CSV logger repeats the last value on later rows.
    """
    from seq2seq.training import ThroughputMonitor

    window = ThroughputMonitor().window
    by_step: dict[int, float] = {}
    with open(metrics_csv, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("tok_per_s"):
                by_step.setdefault(int(row["step"]), float(row["tok_per_s"]))
    ends = range(window - 1, steps, window)
    return [by_step[end] for end in ends if end in by_step]


def run_fit(args: argparse.Namespace, out: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """``seq2seq fit`` for --fit-steps; throughput from its ThroughputMonitor windows."""
    import yaml

    from seq2seq.training import ThroughputMonitor

    fit_dir = out / "fit"
    shutil.rmtree(fit_dir, ignore_errors=True)
    fit_dir.mkdir(parents=True)
    config, _ = load_settings(args.config)
    path = fit_dir / "config.yaml"
    path.write_text(yaml.safe_dump(fit_config(config, fit_dir, args.fit_steps)))
    command = [sys.executable, "-m", "seq2seq.cli", "fit", "--config", str(path)]
    print(f"== fit: {' '.join(command)} (log: {fit_dir / 'fit.log'})", flush=True)
    peak = run_measured(command, thread_env(args.threads), fit_dir / "fit.log")
    rates = window_rates(fit_dir / "logs" / "version_0" / "metrics.csv", args.fit_steps)
    if not rates:
        raise SystemExit(f"bench.py: no tok_per_s in {fit_dir}/logs (fewer steps than a window?)")
    # Window i covers batches [i*w, (i+1)*w) of epoch 0, the same ones train.pt starts with.
    window = ThroughputMonitor().window
    records = torch.load(out / "train.pt")
    used = range(1, len(rates)) if len(rates) > 1 else range(1)
    tokens = seconds = flops = 0.0
    for i in used:
        chunk = records[i * window : (i + 1) * window]
        chunk_tokens = sum(map(n_tokens, chunk))
        tokens += chunk_tokens
        seconds += chunk_tokens / rates[i]
        flops += sum(train_flops(record, settings["config"]) for record in chunk)
    return {
        "steps": args.fit_steps,
        "windows": rates,
        "windows_used": len(used),
        "tokens": tokens,
        "seconds": seconds,
        "flops": flops,
        "peak_rss_mib": peak,
        "command": " ".join(command),
    }


# -- report --------------------------------------------------------------------------------------


def rate(result: dict[str, Any], key: str = "tokens") -> float:
    return result[key] / result["seconds"]


def table_rows(results: dict[str, Any], matmul_rate: float) -> list[tuple[str, Any, Any]]:
    """(metric, ours, marian) rows; marian None where there is no counterpart."""
    rows: list[tuple[str, Any, Any]] = []
    ours, marian = results["train"]["ours"], results["train"]["marian"]
    rows.append(("train tok/s (same batches)", rate(ours), rate(marian)))
    rows.append(
        (
            "train MFU %",
            100 * rate(ours, "flops") / matmul_rate,
            100 * rate(marian, "flops") / matmul_rate,
        )
    )
    rows.append(("train peak RSS MiB", ours["peak_rss_mib"], marian["peak_rss_mib"]))
    fit = results.get("fit")
    if fit:
        rows.append(("fit tok/s (seq2seq fit; vs marian loop)", rate(fit), rate(marian)))
        rows.append(("fit MFU %", 100 * rate(fit, "flops") / matmul_rate, None))
        rows.append(("fit peak RSS MiB", fit["peak_rss_mib"], None))
    for search in SEARCHES:
        ours, marian = results[search]["ours"], results[search]["marian"]
        rows.append((f"{search} sent/s", rate(ours, "sentences"), rate(marian, "sentences")))
        rows.append((f"{search} tgt tok/s", rate(ours), rate(marian)))
        rows.append((f"{search} peak RSS MiB", ours["peak_rss_mib"], marian["peak_rss_mib"]))
    gpu = results.get("gpu")
    if gpu:
        ours, marian = gpu["ours"], gpu["marian"]
        peak = peak_bf16_flops(ours["device_name"])
        rows.append(("GPU bf16 train tok/s", rate(ours), rate(marian)))
        if peak:
            rows.append(
                (
                    "GPU MFU % of bf16 peak",
                    100 * rate(ours, "flops") / peak,
                    100 * rate(marian, "flops") / peak,
                )
            )
        rows.append(
            ("GPU max memory MiB", ours["max_gpu_memory_mib"], marian["max_gpu_memory_mib"])
        )
    return rows


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def print_table(rows: list[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    """Prints metric | ours | marian | ratio; returns the rows as dicts for the JSON."""
    width = max(len(row[0]) for row in rows)
    header = f"{'metric':<{width}} | {'ours':>9} | {'marian':>9} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    out = []
    for metric, ours, marian in rows:
        ratio = ours / marian if marian else None
        shown = f"{ratio:.2f}" if ratio is not None else "-"
        print(f"{metric:<{width}} | {fmt(ours):>9} | {fmt(marian):>9} | {shown:>6}")
        out.append({"metric": metric, "ours": ours, "marian": marian, "ratio": ratio})
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    if args.worker:
        run_worker(args, out)
        return 0
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available()
    started = time.perf_counter()
    busy_start = busy_cpu_seconds() - own_cpu_seconds()
    print(f"== preparing inputs in {out}", flush=True)
    settings = prepare_inputs(args, out, gpu)
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
        results["fit"] = run_fit(args, out, settings)
    if gpu:
        results["gpu"] = {
            m: measure(
                args, out, f"gpu-train-{m}", "--worker", "train", "--model", m, "--device", "cuda"
            )
            for m in ("ours", "marian")
        }
    else:
        print("== GPU section skipped: no CUDA device", flush=True)

    matmul = results["matmul"]
    print()
    rows = print_table(table_rows(results, matmul["best_flops_per_s"]))
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
    elapsed = time.perf_counter() - started
    others = (busy_cpu_seconds() - own_cpu_seconds() - busy_start) / elapsed
    print(
        f"other processes used {others:.2f} of {os.cpu_count()} cores on average during this run"
        + (" (timings perturbed)" if others > 0.1 else "")
    )
    summary = {
        "arguments": {k: v for k, v in vars(args).items() if k not in ("worker", "result")},
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "decode_steps": DECODE_STEPS,
        "model_config": settings["config"],
        "table": rows,
        "results": results,
        "seconds": elapsed,
        "other_processes_cores": others,
        "cpu_count": os.cpu_count(),
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"results: {out / 'results.json'} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
