"""Training either model with our recipe: the one update step (forward, backward, gradient
clipping, AdamW step, schedule step), the loops around it, the batches ``seq2seq fit`` sees,
and ``seq2seq fit`` itself run as a subprocess.

The optimizer and schedule are ``seq2seq.training.schedule.paper_optimizer``, the very function
``TranslationModule.configure_optimizers`` calls, with the recipe's settings (AdamW with the
config's betas/eps/weight decay, inverse-sqrt warmup with ``warmup_steps`` and ``lr_scale``,
the optional ``cooldown_steps`` before ``max_steps``, and, under a time budget, the schedule's
position following the larger of step / max_steps and elapsed / budget), so a benchmark
follows any change to our recipe.
"""

from __future__ import annotations

import csv
import itertools
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import yaml

from .harness import rss_mib, run_measured, synchronize, thread_env
from .reference import build_marian, marian_loss, trainable_parameters

Step = Callable[[Any], torch.Tensor]  # one update on a batch; returns the batch's loss


def recipe_optimizer(
    parameters: list[torch.nn.Parameter],
    settings: dict[str, Any],
    total_steps: int = -1,
    time_used: Callable[[], float] = lambda: 0.0,
):
    """(AdamW, per-step LambdaLR) of our recipe for ``parameters``; ``settings`` are
    ``TranslationModule``'s arguments (``Recipe.model``)."""
    from seq2seq.training.schedule import paper_optimizer

    return paper_optimizer(
        parameters,
        settings["config"]["d_model"],
        settings["warmup_steps"],
        settings["lr_scale"],
        settings["cooldown_steps"],
        total_steps=total_steps,
        adam_betas=settings["adam_betas"],
        adam_eps=settings["adam_eps"],
        weight_decay=settings["weight_decay"],
        time_used=time_used,
    )


def update_step(
    model: torch.nn.Module,
    loss_fn: Callable[[Any], torch.Tensor],
    settings: dict[str, Any],
    clip: float,
    device: torch.device | None = None,
    amp: bool = False,
    total_steps: int = -1,
    time_used: Callable[[], float] = lambda: 0.0,
    accumulate: int = 1,
    fused: bool = False,
) -> Step:
    """step(batch): forward (``loss_fn``, under bf16 autocast if ``amp``) and backward of
    ``model`` on a batch, and every ``accumulate`` batches (the trainer's
    ``accumulate_grad_batches``) one update with our recipe (``settings``:
    ``TranslationModule``'s arguments): gradient-norm clipping at ``clip`` (0: none), AdamW
    step (``fused``: torch's fused kernel instead of its default), schedule step."""
    params = trainable_parameters(model)
    optimizer, scheduler = recipe_optimizer(params, settings, total_steps, time_used)
    if fused:
        optimizer, scheduler = fused_adamw(optimizer, scheduler)
    device_type = device.type if device is not None else "cpu"
    batches = itertools.count(1)

    def step(batch) -> torch.Tensor:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(batch)
        (loss / accumulate if accumulate > 1 else loss).backward()
        if next(batches) % accumulate:
            return loss
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def fused_adamw(optimizer: torch.optim.AdamW, scheduler: torch.optim.lr_scheduler.LambdaLR):
    """The recipe's AdamW and schedule again, with torch's fused AdamW kernel: the same
    settings and rate function (``paper_optimizer`` takes no ``fused``)."""
    settings = optimizer.defaults
    fused = torch.optim.AdamW(
        optimizer.param_groups[0]["params"],
        lr=settings["lr"],
        betas=settings["betas"],
        eps=settings["eps"],
        weight_decay=settings["weight_decay"],
        fused=True,
    )
    return fused, torch.optim.lr_scheduler.LambdaLR(fused, scheduler.lr_lambdas)


def translation_module(settings: dict[str, Any]):
    """Our ``TranslationModule`` from its resolved arguments (``Recipe.model``)."""
    from seq2seq.config import ModelConfig
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.training.module import TranslationModule

    hparams = {k: v for k, v in settings.items() if k not in ("config", "search")}
    return TranslationModule(
        ModelConfig(**settings["config"]), search=SearchConfig(**settings["search"]), **hparams
    )


def model_and_loss(name: str, settings: dict[str, Any]):
    """(model, loss_fn(batch)) of ``ours`` (``TranslationModule.loss``: the label-smoothed loss
    projecting only non-pad target positions) or ``marian`` (``marian_loss``)."""
    if name == "ours":
        module = translation_module(settings)
        return module, lambda batch: module.loss(batch)[0]
    model = build_marian(settings["config"])
    smoothing, pad_id = settings["label_smoothing"], settings["config"]["pad_id"]
    return model, lambda batch: marian_loss(model, batch, smoothing, pad_id)


def timed_steps(
    step: Step, batches: list, warmup: int, device: torch.device
) -> tuple[float, float]:
    """Runs ``step`` on every batch, the first ``warmup`` untimed; (seconds of the timed
    ones, RSS in MiB just before them)."""
    for batch in batches[:warmup]:
        step(batch)
    synchronize(device)
    setup_rss = rss_mib()
    start = time.perf_counter()
    for batch in batches[warmup:]:
        step(batch)
    synchronize(device)
    return time.perf_counter() - start, setup_rss


def train_for(
    model: torch.nn.Module,
    loss_fn: Callable[[Any], torch.Tensor],
    datamodule,
    settings: dict[str, Any],
    clip: float,
    seconds: float,
    max_steps: int,
    name: str,
) -> tuple[int, int, float]:
    """Our recipe in a plain loop over the data module's training batches (Lightning's batch
    order: the loader's epoch is set every epoch), until ``seconds`` have passed or
    ``max_steps`` updates are done, like Lightning's max_time/max_steps: it stops after the
    first update past the budget. The schedule follows the same clock as ours does under
    ``trainer.max_time``. Returns (steps, non-pad tokens, seconds)."""
    start: float | None = None

    def time_used() -> float:
        return 0.0 if start is None else (time.perf_counter() - start) / seconds

    step = update_step(model, loss_fn, settings, clip, total_steps=max_steps, time_used=time_used)
    loader = datamodule.train_dataloader()
    model.train()
    steps = tokens = epoch = 0
    start = time.perf_counter()
    while True:
        loader.set_epoch(epoch)
        for batch in loader:
            loss = step(batch)
            steps += 1
            tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
            elapsed = time.perf_counter() - start
            if steps % 20 == 0:
                print(
                    f"{name} step {steps} epoch {epoch} loss {loss.item():.3f} "
                    f"{tokens / elapsed:.0f} tok/s {elapsed:.0f}s",
                    flush=True,
                )
            if elapsed >= seconds or 0 < max_steps <= steps:
                return steps, tokens, elapsed
        epoch += 1


# -- the batches seq2seq fit sees ------------------------------------------------------------


def batch_dicts(datamodule, count: int) -> list[dict]:
    """The first ``count`` training batches (epoch 0, repeated if it has fewer), as Lightning's
    fit would see them, as dicts of ``Batch`` fields."""
    loader = datamodule.train_dataloader()
    loader.set_epoch(0)
    batches: Iterable = itertools.cycle(loader) if count > len(loader) else loader
    return [vars(batch).copy() for batch in itertools.islice(batches, count)]


def replay_train_tokens(datamodule, steps: int) -> int:
    """Non-pad source+target tokens of the first ``steps`` training batches (epochs repeat).

    The batch order depends only on (seed, epoch), so this is what Lightning fed our model.
    """
    from seq2seq.data.sampler import TokenBatchSampler

    data = datamodule.dataset("train")
    per_example = data.side_lengths("src") + data.side_lengths("tgt") + 1  # tgt_out has eos
    sampler = TokenBatchSampler(
        data.lengths(), datamodule.max_tokens, shuffle=True, seed=datamodule.seed
    )
    tokens, epoch = 0, 0
    while steps > 0:
        batches = sampler.rank_batches(epoch)[:steps]
        tokens += sum(int(per_example[b].sum()) for b in batches)
        steps -= len(batches)
        epoch += 1
    return tokens


# -- seq2seq fit -------------------------------------------------------------------------------


def run_fit(
    config: dict[str, Any],
    out: Path,
    threads: int | None,
    log: Path | None = None,
    label: str = "fit",
) -> tuple[str, float]:
    """``seq2seq fit`` on ``config`` (written to out/config.yaml) in a subprocess with
    ``threads`` threads, its output to ``log`` (else to ours); (the command line, its peak RSS
    in MiB). Exits if it fails."""
    command = fit_command(config, out)
    line = " ".join(command)
    print(f"== {label}: {line}" + (f" (log: {log})" if log else ""), flush=True)
    return line, run_measured(command, thread_env(threads), log)


def fit_command(config: dict[str, Any], out: Path) -> list[str]:
    """The ``seq2seq fit`` command line of ``config``, written to out/config.yaml."""
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return [sys.executable, "-m", "seq2seq.cli", "fit", "--config", str(path)]


def window_rates(metrics_csv: Path, steps: int, window: int) -> list[float]:
    """``ThroughputMonitor``'s tok_per_s of each full window (``window`` steps) of a fit run,
    in order.

    The monitor logs once per window, at the window's last batch (0-based step w-1, 2w-1, ...);
    with ``log_every_n_steps=1`` the CSV logger repeats the last value on later rows.
    """
    by_step: dict[int, float] = {}
    with open(metrics_csv, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("tok_per_s"):
                by_step.setdefault(int(row["step"]), float(row["tok_per_s"]))
    ends = range(window - 1, steps, window)
    return [by_step[end] for end in ends if end in by_step]
