"""The label-smoothed cross-entropy (loss.py) and its hand-written gradient, against the
definition and against torch's own."""

import pytest
import torch
import torch.nn.functional as F

import seq2seq.loss
from seq2seq.loss import label_smoothed_cross_entropy


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
