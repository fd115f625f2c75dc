"""``gpu_check``'s training throughput: ``configs/base.yaml`` (bf16-mixed) on millions of
unique pairs, ours and Hugging Face's ``MarianMTModel`` on the same batches, with and without
what the field uses to get there (``torch.compile``, fused AdamW, larger token batches sized
to memory).

One worker job, ``train``: it builds the ``data`` bench's corpus (N distinct pairs joined from
the bundled ones), prepares the config's data module on it (``prepare_data``), then runs
each ``Variant`` in turn in the same process: a fresh model, our
recipe's update step (``benchmarks.train.update_step``: bf16 autocast, gradient clipping,
AdamW and the schedule, the config's gradient accumulation) fed by the data module's own
loader (its worker processes as configured), ``warmup`` untimed steps, then up to ``steps``
timed ones or until the variant's share of the time budget is spent. Per variant: tokens/s
(non-pad source + target), model FLOPs utilisation (``benchmarks.flops``' count over the
device's peak), the time the loop waited for the loader per step, and peak memory.
"""

from __future__ import annotations

import gc
import resource
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MAX_CHARS = 200  # the data bench's --max-chars default: joined pairs stay within max_len_chars


@dataclass(frozen=True)
class Variant:
    """One training measurement: a model and which speed-ups are on."""

    model: str  # "ours" or "marian"
    compile: bool = False  # torch.compile of the loss (forward) function
    fused: bool = False  # AdamW(fused=True) instead of torch's default (foreach)
    large: bool = False  # token batches sized to memory, accumulation cut to match

    @property
    def name(self) -> str:
        on = [n for n, flag in (("compile", self.compile), ("fused", self.fused)) if flag]
        return "+".join([self.model, *on, *(["large"] if self.large else [])])


# The config as written first (the reference rows), then one speed-up each, then all of
# them. The compiled ones come last (compiling is the slow part, and the budget may end
# first), all of them on first: its graphs are cached, so compiling again for ours+compile
# alone is quick.
VARIANTS = (
    Variant("ours"),
    Variant("marian"),
    Variant("ours", fused=True),
    Variant("ours", large=True),
    Variant("ours", compile=True, fused=True, large=True),
    Variant("marian", compile=True, fused=True, large=True),
    Variant("ours", compile=True),
)
# The dry run's: every code path (each model, each speed-up, both ways of compiling) once.
DRY_VARIANTS = ("ours", "marian", "ours+compile+fused+large", "marian+compile+fused+large")


def recipe_overrides(job: dict[str, Any]) -> list[str]:
    """The config's data moved to the synthetic corpus and this run's cache, plus the job's
    own overrides (the dry run's tiny shapes)."""
    corpus = Path(job["work"]) / f"pairs-{job['pairs']}.tsv"
    data = ["--data.corpus", "tsv", "--data.path", str(corpus)]
    data += ["--data.cache_dir", str(Path(job["work"]) / "cache")]
    return [*data, "--data.num_proc", str(job["num_proc"]), *job["overrides"]]


def prepare_data(job: dict[str, Any]):
    """Builds the corpus and prepares the data module: (recipe, prepared data module, their
    times and sizes)."""
    from benchmarks.data_corpus import corpus
    from benchmarks.recipe import load_recipe

    start = time.perf_counter()
    tsv = corpus(Path(job["work"]), job["pairs"], f"{job['pairs']:,}", MAX_CHARS, print)
    built = time.perf_counter()
    recipe = load_recipe(job["config"], recipe_overrides(job))
    datamodule = recipe.prepared_datamodule()
    return (
        recipe,
        datamodule,
        {
            "pairs": job["pairs"],
            "corpus_bytes": tsv.stat().st_size,
            "corpus_seconds": built - start,
            "prepare_seconds": time.perf_counter() - built,
            "train_batches": len(datamodule.train_dataloader()),
            "max_tokens": datamodule.max_tokens,
        },
    )


def train(job: dict[str, Any], save) -> dict[str, Any]:
    """The data, then every variant of ``VARIANTS`` in turn, each within its share of the time
    to ``job["deadline"]``; ``save(result)`` after each step, so that a run stopped at its
    budget keeps what it measured."""
    import torch

    device = torch.device(job["device"])
    recipe, datamodule, data = prepare_data(job)
    peak, peak_source = peak_flops(device)
    result: dict[str, Any] = {
        "data": data,
        "config": job["config"],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "peak_flops": peak,
        "peak_source": peak_source,
        "accumulate": int(recipe.yaml.get("trainer", {}).get("accumulate_grad_batches", 1)),
        "variants": [],
    }
    save(result)
    variants = [v for v in VARIANTS if v.name in job.get("variants", [v.name])]
    for index, variant in enumerate(variants):
        remaining = job["deadline"] - time.time()
        least = job["min_seconds"] * (job["compile_factor"] if variant.compile else 1)
        if remaining < least:
            row = {**asdict(variant), "name": variant.name, "skipped": "budget"}
        else:
            deadline = time.time() + remaining / (len(variants) - index)
            row = measure_variant(variant, recipe, datamodule, job, result, deadline)
        result["variants"].append(row)
        save(result)
    return result


def measure_variant(
    variant: Variant, recipe, datamodule, job: dict[str, Any], result: dict, deadline: float
) -> dict[str, Any]:
    """One variant's row; an error (out of memory included) is recorded, not raised. Too
    large a batch is halved and tried again."""
    import torch

    row: dict[str, Any] = {**asdict(variant), "name": variant.name}
    config_tokens = datamodule.max_tokens
    max_tokens = config_tokens * (batch_factor(result, job) if variant.large else 1)
    while True:
        # Accumulation cut for larger batches: an update holds at least the config's tokens.
        accumulate = max(1, result["accumulate"] * config_tokens // max_tokens)
        try:
            measured = run_variant(
                variant, recipe, datamodule, job, max_tokens, accumulate, deadline
            )
            return row | measured | throughput(measured, result["peak_flops"])
        except torch.OutOfMemoryError as error:
            if max_tokens <= config_tokens:
                return row | {"error": f"out of memory: {str(error).splitlines()[0]}"}
            max_tokens //= 2
        except Exception as error:  # a failed variant must not cost the others
            return row | {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
        finally:
            release(job["device"])


def batch_factor(result: dict, job: dict[str, Any]) -> int:
    """How many times the config's batch ``large`` takes: the largest power of two (at most
    ``job["large_cap"]``) whose memory, the config's own peak (``ours``) scaled by it, fits in
    60% of the device's; an overestimate, as the weights and optimizer do not grow."""
    measured = [v for v in result["variants"] if v["name"] == "ours" and "peak_memory_mib" in v]
    per_batch = measured[0]["peak_memory_mib"] * 2**20 if measured else None
    factor = 1
    while factor * 2 <= job["large_cap"] and (
        per_batch is None or 2 * factor * per_batch <= 0.6 * device_memory(job["device"])
    ):
        factor *= 2
    return factor


def run_variant(
    variant: Variant,
    recipe,
    datamodule,
    job: dict[str, Any],
    max_tokens: int,
    accumulate: int,
    deadline: float,
) -> dict[str, Any]:
    """Builds the model and its step, then times the loop; the raw measurements."""
    import torch

    from benchmarks.flops import forward_flops
    from benchmarks.train import model_and_loss, update_step

    device, config_tokens = torch.device(job["device"]), datamodule.max_tokens
    settings = {**recipe.model, "cooldown_steps": 0}  # no run length to anneal towards
    torch.manual_seed(recipe.seed)
    model, loss_fn = model_and_loss(variant.model, settings)
    model.to(device).train()
    if variant.compile:
        compile_layers(variant.model, model, job["compile_backend"])
    step = update_step(
        model,
        loss_fn,
        settings,
        recipe.gradient_clip_val,
        device,
        amp=True,  # bf16-mixed, as the config trains
        accumulate=accumulate,
        fused=variant.fused,
    )
    datamodule.max_tokens = max_tokens
    mc = settings["config"]
    try:
        loop = timed_loop(step, datamodule.train_dataloader(), job, device, mc["pad_id"], deadline)
    finally:
        datamodule.max_tokens = config_tokens
    flops = sum(3 * forward_flops(s.tolist(), t.tolist(), mc) for s, t in loop.pop("lengths"))
    return loop | {"max_tokens": max_tokens, "accumulate": accumulate, "flops": flops}


def compile_layers(name: str, model, backend: str) -> None:
    """``torch.compile`` of the encoder-decoder stack, in place: ours, the model's ``encode``
    and ``decoder_states``; Marian, its ``MarianModel``. The output projection and the loss
    stay outside for both: ours picks the non-pad positions before projecting, a shape that
    depends on the data, which broke the graph and recompiled it at every new batch (seen
    with the whole loss compiled)."""
    import torch

    def compiled(function):
        return torch.compile(function, dynamic=True, backend=backend)

    if name == "ours":
        for method in ("encode", "decoder_states"):
            setattr(model.model, method, compiled(getattr(model.model, method)))
    else:
        model.model = compiled(model.model)


def timed_loop(
    step, loader, job: dict[str, Any], device, pad_id: int, deadline: float
) -> dict[str, Any]:
    """``job["warmup"]`` untimed steps, then timed ones until ``job["steps"]`` or the deadline:
    seconds, tokens, the time spent waiting for the next batch, peak memory, each timed
    batch's sentence lengths (source, target) for the FLOPs."""
    import torch

    from benchmarks.harness import synchronize

    batches = epochs(loader)
    warmup_start = time.perf_counter()
    for _ in range(job["warmup"]):
        step(next(batches).to(device, non_blocking=True))
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs = compiled_graphs()
    start = time.perf_counter()
    waited, tokens, lengths = 0.0, 0, []
    while len(lengths) < job["steps"] and (len(lengths) < 1 or time.time() < deadline):
        asked = time.perf_counter()
        batch = next(batches)
        waited += time.perf_counter() - asked
        tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
        lengths.append((batch.src.ne(pad_id).sum(1), batch.tgt_out.ne(pad_id).sum(1)))
        step(batch.to(device, non_blocking=True))
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "steps": len(lengths),
        "seconds": seconds,
        "warmup_seconds": start - warmup_start,
        "tokens": tokens,
        "loader_wait_seconds": waited,
        "peak_memory_mib": peak_memory_mib(device),
        "compiled_while_timed": compiled_graphs() - graphs,  # a recompilation slows them
        "lengths": lengths,
    }


def compiled_graphs() -> int:
    """Graphs ``torch.compile`` has made in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def epochs(loader):
    """The loader's batches, epoch after epoch (the small dry-run corpus runs out)."""
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def throughput(measured: dict[str, Any], peak: float | None) -> dict[str, Any]:
    """tokens/s, MFU against ``peak`` and the loader's wait per step."""
    seconds, steps = measured["seconds"], measured["steps"]
    return {
        "tokens_per_s": measured["tokens"] / seconds,
        "mfu": measured["flops"] / seconds / peak if peak else None,
        "loader_wait_ms": 1000 * measured["loader_wait_seconds"] / steps,
        "step_ms": 1000 * seconds / steps,
    }


def peak_flops(device) -> tuple[float | None, str]:
    """MFU's denominator: the GPU's published dense bf16 peak by its name (``PEAK_BF16_TFLOPS``),
    or on the CPU (the dry run) its fp32 matmul rate measured now."""
    import torch

    from benchmarks.flops import matmul_rate, peak_bf16_flops

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = peak_bf16_flops(name)
        return peak, f"{name}, published dense bf16" if peak else f"{name}: no published peak"
    return matmul_rate(256)["best_flops_per_s"], "this CPU's fp32 matmul, measured"


def peak_memory_mib(device) -> float:
    """The GPU's peak allocation since the timed loop began, or on the CPU this process's
    peak resident set (from the start: the dry run's figure is only a check)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def device_memory(device: str) -> float:
    """Bytes of memory of the device: the GPU's, or the machine's."""
    import os

    import torch

    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def release(device: str) -> None:
    """Frees what a variant left (its model, optimizer, compiled graphs) before the next."""
    import torch

    torch._dynamo.reset()
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
