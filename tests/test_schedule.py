"""The paper's learning-rate schedule and the cooldown."""

import pytest

from seq2seq.schedule import cooldown_factor, inverse_sqrt_schedule


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
