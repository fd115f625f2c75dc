"""Label-smoothed cross-entropy (paper §5.4), with its gradient computed in the forward pass.

loss = mean over the N target positions of
    (1 - eps) * -log p(y) + eps * mean over the V classes of -log p(class),
exactly ``F.cross_entropy(logits, targets, label_smoothing=eps)``. Its gradient with respect
to the logits has a closed form,
    d loss / d z = (softmax(z) - (1 - eps) * onehot(y) - eps / V) / N,
so the forward pass writes it straight away, a block of rows at a time while that block is
still in cache, instead of autograd's chain (log_softmax, gather, sum, then their backward
passes, each a fresh (N, V) tensor). With an 8k vocabulary the (N, V) logits are the largest
tensor of a training step; this halves the passes over them (``python scripts/bench.py
marian``, training).
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK_ELEMENTS = 2**20  # 4 MB of float32 per block of rows: it stays in a CPU's cache


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, epsilon: float) -> Tensor:
        n_rows, n_classes = logits.shape
        grad = torch.empty_like(logits)
        total = logits.new_zeros(())
        # A GPU gains nothing from blocks (and would pay a kernel launch per op per block).
        block_rows = n_rows if logits.is_cuda else max(1, BLOCK_ELEMENTS // n_classes)
        for start in range(0, n_rows, block_rows):
            block = slice(start, start + block_rows)
            log_probs = torch.log_softmax(logits[block], dim=-1)  # (R, V)
            gold = (torch.arange(log_probs.shape[0], device=logits.device), targets[block])
            smooth = log_probs.sum(dim=-1) / n_classes  # (R,)
            total -= ((1.0 - epsilon) * log_probs[gold] + epsilon * smooth).sum()
            # The gradient of the block's (unnormalised) loss, in the same buffer's rows.
            probs = torch.exp(log_probs, out=grad[block])
            probs.sub_(epsilon / n_classes)
            probs[gold] -= 1.0 - epsilon
        ctx.save_for_backward(grad)
        ctx.n_rows, ctx.used = n_rows, False
        return total / n_rows

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output: Tensor):
        if ctx.used:
            raise RuntimeError("label_smoothed_cross_entropy: a second backward is not supported")
        ctx.used = True
        (grad,) = ctx.saved_tensors
        # The gradient buffer is used once: scaled in place rather than copied.
        return grad.mul_(grad_output / ctx.n_rows), None, None


def label_smoothed_cross_entropy(logits: Tensor, targets: Tensor, epsilon: float) -> Tensor:
    """Mean label-smoothed cross-entropy of (N, V) logits (computed in float32) and (N,) gold
    ids; equal to ``F.cross_entropy(logits.float(), targets, label_smoothing=epsilon)``."""
    logits = logits.float()
    if logits.shape[0] == 0 or not (torch.is_grad_enabled() and logits.requires_grad):
        return torch.nn.functional.cross_entropy(logits, targets, label_smoothing=epsilon)
    return _SmoothedCrossEntropy.apply(logits, targets, epsilon)
