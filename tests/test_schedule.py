"""The paper's learning-rate schedule, the cooldown, and the optimiser that applies them."""

import pytest
import torch

from seq2seq.training.schedule import (
    cooldown_factor,
    inverse_sqrt_schedule,
    paper_optimizer,
    training_progress,
)


def test_schedule_peaks_at_warmup_with_the_papers_value():
    rates = [inverse_sqrt_schedule(s, 512, 4000, 1.0) for s in range(1, 20001)]
    peak = max(range(len(rates)), key=rates.__getitem__) + 1
    assert peak == 4000
    assert rates[peak - 1] == pytest.approx(512**-0.5 * 4000**-0.5)
    assert rates[99] == pytest.approx(100 * 512**-0.5 * 4000**-1.5)  # linear warmup
    assert rates[15999] == pytest.approx(512**-0.5 * 16000**-0.5)  # inverse sqrt decay


def test_cooldown_is_linear_to_zero_over_the_last_share_of_training():
    assert cooldown_factor(0.0, 0.2) == 1.0
    assert cooldown_factor(0.8, 0.2) == pytest.approx(1.0)
    assert cooldown_factor(0.9, 0.2) == pytest.approx(0.5)
    assert cooldown_factor(1.0, 0.2) == 0.0
    assert cooldown_factor(0.9, 0.0) == 1.0  # off


def test_training_progress_is_the_larger_share_of_steps_and_time_at_most_one():
    assert training_progress(10, 100, 0.0) == pytest.approx(0.1)
    assert training_progress(10, 100, 0.3) == pytest.approx(0.3)  # the clock is ahead
    assert training_progress(60, 100, 0.3) == pytest.approx(0.6)  # the steps are ahead
    assert training_progress(150, 100, 0.0) == 1.0 and training_progress(1, 100, 2.0) == 1.0
    assert training_progress(10, -1, 0.25) == 0.25  # no step budget: the clock alone


def test_paper_optimizer_is_adam_at_the_schedule_rate_with_the_papers_betas():
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer, scheduler = paper_optimizer([weight], d_model=32, warmup_steps=10, lr_scale=0.5)
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    for step in range(25):  # the rate of the update after `step` updates
        assert group["lr"] == pytest.approx(inverse_sqrt_schedule(step + 1, 32, 10, 0.5))
        weight.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    assert (weight < 0).all()  # it did update


def test_paper_optimizer_cooldown_ends_at_zero_and_follows_a_clock_that_is_ahead():
    weight = torch.nn.Parameter(torch.zeros(1))
    _, scheduler = paper_optimizer([weight], 32, 10, cooldown_steps=4, total_steps=20)
    rate = scheduler.lr_lambdas[0]
    assert rate(15) == pytest.approx(inverse_sqrt_schedule(16, 32, 10, 1.0))  # not yet
    assert rate(18) == pytest.approx(inverse_sqrt_schedule(19, 32, 10, 1.0) * 0.5)
    assert rate(20) == 0.0
    clock = {"used": 0.9}  # 90% of a time budget used at step 2: the schedule is at step 18
    _, scheduler = paper_optimizer(
        [weight], 32, 10, cooldown_steps=4, total_steps=20, time_used=lambda: clock["used"]
    )
    assert scheduler.lr_lambdas[0](2) == pytest.approx(rate(18))
    with pytest.raises(ValueError, match="trainer.max_steps"):
        paper_optimizer([weight], 32, 10, cooldown_steps=4)
