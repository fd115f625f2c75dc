"""The training recipe: the paper's schedule, the label-smoothed loss and its padding mask."""

import pytest
import torch

from helpers import tiny_config
from seq2seq.data.batching import Batch
from seq2seq.training import (
    TranslationModule,
    cooldown_factor,
    inverse_sqrt_schedule,
    label_smoothed_loss,
)


def test_schedule_peaks_at_warmup_with_the_papers_value():
    rates = [inverse_sqrt_schedule(s, 512, 4000, 1.0) for s in range(1, 20001)]
    peak = max(range(len(rates)), key=rates.__getitem__) + 1
    assert peak == 4000
    assert rates[peak - 1] == pytest.approx(512**-0.5 * 4000**-0.5)
    assert rates[99] == pytest.approx(100 * 512**-0.5 * 4000**-1.5)  # linear warmup
    assert rates[15999] == pytest.approx(512**-0.5 * 16000**-0.5)  # inverse sqrt decay


def test_cooldown_is_linear_to_zero_over_the_last_steps():
    assert cooldown_factor(0, 1000, 200) == 1.0
    assert cooldown_factor(800, 1000, 200) == 1.0
    assert cooldown_factor(900, 1000, 200) == pytest.approx(0.5)
    assert cooldown_factor(1000, 1000, 200) == 0.0
    assert cooldown_factor(900, 1000, 0) == 1.0  # off


def test_label_smoothed_loss_matches_its_definition():
    torch.manual_seed(0)
    logits, targets, eps = torch.randn(7, 11), torch.randint(0, 11, (7,)), 0.1
    log_probs = logits.log_softmax(-1)
    nll = -log_probs.gather(1, targets[:, None]).squeeze(1)
    smooth = -log_probs.mean(-1)  # cross-entropy with the uniform distribution
    expected = ((1 - eps) * nll + eps * smooth).mean()
    torch.testing.assert_close(label_smoothed_loss(logits, targets, eps), expected)


def make_batch(src, tgt):
    """Right-pad lists of ids into a Batch (bos 2, eos 3, pad 0)."""
    width_s = max(map(len, src))
    width_t = max(map(len, tgt)) + 1
    pad = lambda rows, w: torch.tensor([r + [0] * (w - len(r)) for r in rows])  # noqa: E731
    tgt_in = pad([[2, *t] for t in tgt], width_t)
    tgt_out = pad([[*t, 3] for t in tgt], width_t)
    return Batch(pad(src, width_s), tgt_in, tgt_out, sum(map(len, src)), int((tgt_out != 0).sum()))


def test_loss_ignores_padding_and_counts_only_real_targets():
    torch.manual_seed(0)
    module = TranslationModule(tiny_config()).eval()
    src, tgt = [[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14, 15]]
    loss, _, n = module.loss(make_batch(src, tgt))
    # Same sentences with extra padding columns: identical loss and count.
    padded = make_batch([s + [0, 0] for s in src], tgt)
    padded.src = torch.nn.functional.pad(make_batch(src, tgt).src, (0, 3))
    loss_padded, _, n_padded = module.loss(padded)
    assert n == n_padded == 2 + 1 + 4 + 1
    torch.testing.assert_close(loss, loss_padded)
    # And the loss is the token-weighted mean of the two sentences' losses.
    one = [module.loss(make_batch([s], [t])) for s, t in zip(src, tgt, strict=True)]
    weighted = sum(item[0] * item[2] for item in one) / n
    torch.testing.assert_close(loss, weighted)
