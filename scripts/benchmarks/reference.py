"""The reference implementation: Hugging Face ``MarianMTModel`` as our model.

``MarianConfig`` with our model's d_model, heads, layers, d_ff, dropouts, activation and
positions; post-LN and sinusoidal positions (Marian's only choices), embeddings scaled by
sqrt(d_model) and shared by the encoder, the decoder and the output projection; our vocabulary
and special ids (``seq2seq.tools.marian_weights.marian_config``, the same mapping as ``seq2seq
export``). Hugging Face's own initialisation (normal, std ``init_std`` = 0.02) is kept: it is part
of the
reference implementation. It trains with Hugging Face's own forward (``marian_loss``) and
decodes with ``generate`` under our search's rules (``generate``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from seq2seq.decoding.search import SpecialTokens


def build_marian(model_config: dict[str, Any]):  # noqa: ANN201 (transformers type)
    """A freshly initialised ``MarianMTModel`` of the shape, vocabulary and special ids of
    ``model_config`` (a ``ModelConfig`` as a dict); exits if Marian cannot represent it."""
    from transformers import MarianMTModel

    from seq2seq.config import ModelConfig
    from seq2seq.tools.marian_weights import check_exportable, marian_config

    config = ModelConfig.from_dict(model_config)
    try:
        check_exportable(config)
    except ValueError as error:
        raise SystemExit(f"{Path(sys.argv[0]).name}: {error}") from None
    return MarianMTModel(marian_config(config))


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """What the optimizer updates: ``parameters()`` yields the tied embedding once, and
    Marian's sinusoid table is frozen."""
    return [p for p in model.parameters() if p.requires_grad]


def marian_loss(model, batch, label_smoothing: float, pad_id: int) -> torch.Tensor:
    """Mean label-smoothed cross-entropy over the non-pad target tokens of a batch, from Hugging
    Face's forward (which projects every target position, padding included)."""
    logits = model(
        input_ids=batch.src,
        attention_mask=(batch.src != pad_id).long(),
        decoder_input_ids=batch.tgt_in,  # [bos] + tgt; right padding is hidden by causality
        use_cache=False,
    ).logits
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_out.flatten(),
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
    )


@torch.no_grad()
def generate(
    model, src: torch.Tensor, beam: int, specials: SpecialTokens, length_penalty: float, **limits
) -> list[list[int]]:
    """``generate`` on a right-padded source batch with our search's rules: never pad, unk or
    bos, eos forced at the length limit, and (beam > 1) our length penalty alpha, which Hugging
    Face applies as ``logP / length ** alpha``, with early stopping. ``limits`` are
    ``max_new_tokens`` (the output limit, eos included) and ``min_new_tokens``. Returns each
    output's ids without the decoder start token."""
    beam_options = {"length_penalty": length_penalty, "early_stopping": True} if beam > 1 else {}
    generated = model.generate(
        input_ids=src,
        attention_mask=(src != specials.pad).long(),
        num_beams=beam,
        do_sample=False,
        forced_eos_token_id=specials.eos,
        suppress_tokens=list(specials.never_generated),
        **limits,
        **beam_options,  # generate warns about them in greedy mode
    )
    return [row[1:] for row in generated.tolist()]


def output_length(row: list[int], eos: int) -> int:
    """Tokens of a generated output, its eos included."""
    return row.index(eos) + 1 if eos in row else len(row)


def strip_specials(row: list[int], specials: SpecialTokens) -> list[int]:
    """A generated output's ids without the eos and what follows it (padding)."""
    return (
        row[: row.index(specials.eos)]
        if specials.eos in row
        else [t for t in row if t != specials.pad]
    )
