"""The optimiser and learning-rate schedule of the paper (§5.3), plus an optional cooldown.

Plain PyTorch: ``TranslationModule`` uses it through Lightning, and the benchmarks train a
Hugging Face model with exactly the same recipe in a plain loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


def inverse_sqrt_schedule(step: float, d_model: int, warmup_steps: int, scale: float) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (paper §5.3).

    ``step`` counts from 1 (optimizer updates), so the first update already has a nonzero rate.
    """
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def cooldown_factor(progress: float, cooldown_share: float) -> float:
    """1 until the last ``cooldown_share`` of training, then linearly down to 0 at the end.

    ``progress`` is the share of the training budget used, in [0, 1] (see
    ``training_progress``). Not in the paper: short runs end far from convergence at the
    inverse-sqrt rate, and annealing to zero over the last stretch recovers much of the gap
    (``cooldown_share=0`` turns it off).
    """
    if cooldown_share <= 0:
        return 1.0
    return max(0.0, min(1.0, (1.0 - progress) / cooldown_share))


def training_progress(step: int, total_steps: int, time_used: float) -> float:
    """The share of the training budget used after ``step`` updates: the larger of
    ``step / total_steps`` and ``time_used`` (the share of a time budget used, 0 without one).

    A run that the time budget stops (a slower machine than the recipe was tuned on) then ends
    annealed, as one stopped by its step budget does, instead of being cut off at full
    learning rate.
    """
    by_steps = step / total_steps if total_steps > 0 else 0.0
    return min(1.0, max(by_steps, time_used))


def paper_optimizer(
    parameters: Iterable[torch.nn.Parameter],
    d_model: int,
    warmup_steps: int,
    lr_scale: float = 1.0,
    cooldown_steps: int = 0,
    total_steps: int = -1,
    adam_betas: tuple[float, float] = (0.9, 0.98),
    adam_eps: float = 1e-9,
    weight_decay: float = 0.0,
    time_used: Callable[[], float] = lambda: 0.0,
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """Adam(W) with the inverse-square-root warmup schedule, stepped once per update.

    Args:
        cooldown_steps: anneal linearly to 0 over the last this-many of ``total_steps``
            (0 = the paper's schedule unchanged; needs ``total_steps``).
        time_used: the share of a time budget used so far (0 without one). The schedule's own
            step is then the real one unless the clock is further along (a slower machine),
            when it is that share of ``total_steps``: warmup, decay and cooldown keep their
            shape over the run instead of being cut off by the clock.
    """
    optimizer = torch.optim.AdamW(
        parameters,
        lr=1.0,  # the schedule supplies the whole rate
        betas=tuple(adam_betas),
        eps=adam_eps,
        weight_decay=weight_decay,
    )
    if cooldown_steps > 0 and total_steps <= 0:
        raise ValueError("cooldown_steps needs trainer.max_steps (the run's length)")
    cooldown_share = cooldown_steps / total_steps if cooldown_steps > 0 else 0.0

    def rate(step: int) -> float:  # step = optimizer updates done so far
        used = time_used()
        position = max(step, used * total_steps) if total_steps > 0 else step
        progress = training_progress(step, total_steps, used)
        return inverse_sqrt_schedule(position + 1, d_model, warmup_steps, lr_scale) * (
            cooldown_factor(progress, cooldown_share)
        )

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def refresh_rate(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """Set the optimizer's current rate again, as ``scheduler`` set it after the last update but
    with its inputs as they are now: for ``paper_optimizer``'s schedule, the clock
    (``time_used``), which may have moved a lot since (a validation in between)."""
    lambdas, bases = scheduler.lr_lambdas, scheduler.base_lrs
    for group, base, rate in zip(scheduler.optimizer.param_groups, bases, lambdas, strict=True):
        group["lr"] = base * rate(scheduler.last_epoch)
