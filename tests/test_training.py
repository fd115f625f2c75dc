"""The training recipe: the paper's schedule, the label-smoothed loss and its padding mask."""

import pytest
import torch
import torch.nn.functional as F

import seq2seq.loss
from helpers import tiny_config
from seq2seq.data.batching import Batch
from seq2seq.loss import label_smoothed_cross_entropy
from seq2seq.training import (
    TranslationModule,
    cooldown_factor,
    inverse_sqrt_schedule,
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


@pytest.mark.parametrize("rows", [7, 300])
@pytest.mark.parametrize("block_elements", [2**20, 64])  # one block of rows, or many
def test_label_smoothed_loss_and_its_gradient_match_the_definition(
    rows, block_elements, monkeypatch
):
    monkeypatch.setattr(seq2seq.loss, "BLOCK_ELEMENTS", block_elements)
    torch.manual_seed(0)
    logits, targets, eps = torch.randn(rows, 11) * 3, torch.randint(0, 11, (rows,)), 0.1
    logits.requires_grad_(True)
    log_probs = logits.log_softmax(-1)
    nll = -log_probs.gather(1, targets[:, None]).squeeze(1)
    smooth = -log_probs.mean(-1)  # cross-entropy with the uniform distribution
    expected = ((1 - eps) * nll + eps * smooth).mean()
    (expected_grad,) = torch.autograd.grad(expected * 2.5, logits)
    loss = label_smoothed_cross_entropy(logits, targets, eps)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(
        loss, F.cross_entropy(logits, targets, label_smoothing=eps), rtol=1e-6, atol=1e-6
    )
    (loss * 2.5).backward()  # a scaled loss scales the gradient
    torch.testing.assert_close(logits.grad, expected_grad, rtol=1e-5, atol=1e-7)
    with torch.no_grad():  # validation: the same value, no gradient kept
        torch.testing.assert_close(label_smoothed_cross_entropy(logits, targets, eps), expected)


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


class LossIsNanOn(TranslationModule):
    """A module whose training loss is NaN on the chosen training batches (0-based calls)."""

    def __init__(self, bad_batches, **kwargs):
        super().__init__(tiny_config(), warmup_steps=2, **kwargs)
        self.bad_batches, self.calls = set(bad_batches), 0

    def loss(self, batch):
        loss, nll, n = super().loss(batch)
        if self.training:
            if self.calls in self.bad_batches:
                loss = loss * float("nan")
            self.calls += 1
        return loss, nll, n


def train_batches(count: int) -> list:
    generator = torch.Generator().manual_seed(0)
    rows = lambda n: torch.randint(4, 40, (3, n), generator=generator).tolist()  # noqa: E731
    return [make_batch(rows(5), rows(4)) for _ in range(count)]


def fit_on(module, batches, callbacks=()) -> None:
    import lightning as L

    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )
    loader = torch.utils.data.DataLoader(batches, batch_size=None, collate_fn=lambda b: b)
    trainer.fit(module, train_dataloaders=loader)
    return trainer


def test_nonfinite_loss_skips_the_update_and_training_goes_on():
    import lightning as L

    class Snapshots(L.Callback):
        def __init__(self):
            self.after = []  # parameters after each training batch

        def on_train_batch_end(self, trainer, module, *args):
            self.after.append(torch.cat([p.detach().flatten() for p in module.parameters()]))

    torch.manual_seed(0)
    module, snapshots = LossIsNanOn({2, 3}), Snapshots()
    fit_on(module, train_batches(6), callbacks=[snapshots])
    assert module.skipped_steps == 2
    after = snapshots.after
    assert torch.equal(after[1], after[2]) and torch.equal(after[2], after[3])  # no update
    assert not torch.equal(after[3], after[4]) and not torch.equal(after[0], after[1])
    assert torch.isfinite(after[-1]).all()
    assert module.trainer.callback_metrics["skipped_steps"] == 2


def test_a_loss_that_stays_nonfinite_stops_training_with_a_message():
    from seq2seq.training import TrainingStopped

    module = LossIsNanOn(set(range(100)), max_nonfinite_steps=3)
    with pytest.raises(TrainingStopped, match=r"not finite \(nan\) for 3 batches in a row"):
        fit_on(module, train_batches(6))
    assert module.skipped_steps == 3
