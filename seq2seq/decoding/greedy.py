"""Greedy search: the most probable token at every step, for a batch of sentences at once
(beam search with one beam, without its bookkeeping).
"""

from __future__ import annotations

import torch
from torch import Tensor

from seq2seq.decoding.repetition import RepetitionGuard
from seq2seq.decoding.search import (
    Hypothesis,
    Scorer,
    SpecialTokens,
    restrict_next_tokens_,
    still_empty,
    top_k_by_blocks,
    worth_dropping,
)


@torch.no_grad()
def greedy_search(
    scorer: Scorer,
    max_lens: Tensor,
    specials: SpecialTokens,
    guard: RepetitionGuard = RepetitionGuard(),  # noqa: B008 (frozen)
) -> list[Hypothesis]:
    """Pick the most probable token at every step, for B sentences at once.

    Args:
        scorer: incremental model over B rows.
        max_lens: (B,) length limits, eos included.
        specials: the model's special token ids.
        guard: the repetition guard (``SearchConfig.guard``).

    Returns:
        One hypothesis per sentence, ``score`` = ``log_prob`` (no length normalisation).
    """
    batch = max_lens.shape[0]
    device = max_lens.device
    tokens = torch.full((batch, int(max_lens.max())), specials.pad, dtype=torch.long, device=device)
    log_prob = torch.zeros(batch, device=device)
    # The scorer's rows hold the sentences `active`; finished ones are dropped now and then.
    active = torch.arange(batch, device=device)
    limits = max_lens  # of the active rows
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    last = torch.full((batch,), specials.bos, dtype=torch.long, device=device)
    for step in range(tokens.shape[1]):
        written = tokens[active, None, :step]
        # Normalised over the whole vocabulary, banned tokens included, then restricted.
        logits = guard.penalize_(scorer(last)[:, None], written, specials.pad)  # (N, 1, V)
        empty = still_empty(written, specials)
        log_probs = restrict_next_tokens_(
            logits.log_softmax(dim=-1), step, limits, specials, empty, written, guard
        )[:, 0]
        best_log_prob, best = top_k_by_blocks(log_probs, 1)
        best_log_prob, best = best_log_prob[:, 0], best[:, 0].masked_fill(finished, specials.pad)
        log_prob[active] += best_log_prob.masked_fill(finished, 0.0)
        tokens[active, step] = best
        finished |= best == specials.eos
        if bool(finished.all()):
            break
        last = best
        if worth_dropping(finished):
            keep = (~finished).nonzero()[:, 0]
            scorer.reorder(keep)
            active, limits, finished, last = active[keep], limits[keep], finished[keep], last[keep]
    return [
        _greedy_hypothesis(row, float(lp), specials.eos)
        for row, lp in zip(tokens, log_prob, strict=True)
    ]


def _greedy_hypothesis(row: Tensor, log_prob: float, eos: int) -> Hypothesis:
    out = row.tolist()
    if eos in out:
        out = out[: out.index(eos)]
    return Hypothesis(out, log_prob, log_prob)
