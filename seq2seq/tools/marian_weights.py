"""Our encoder-decoder as a Hugging Face ``MarianMTModel``: its config and its weights, exactly.

Marian is the same post-LN Transformer with one tied, scaled embedding, so the mapping is a
renaming of weights plus one exact change of basis: the paper (and we) interleave the sinusoids,
``PE[:, 2i] = sin``, ``PE[:, 2i+1] = cos``, while Marian puts all sines first and all cosines
second. Relabelling the d_model coordinates of the residual stream by the permutation
``perm = [0, 2, 4, ..., 1, 3, 5, ...]`` (Marian's coordinate j is our coordinate perm[j]) turns
one model into the other exactly: every weight that reads the residual stream has its input
columns permuted, every weight that writes it has its output rows permuted, LayerNorm
parameters are permuted, and attention's inner head space is untouched.

:mod:`seq2seq.tools.export` writes the result to disk (and on to CTranslate2);
:mod:`seq2seq.tools.pretrained` applies the inverse mapping.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seq2seq.config import ModelConfig
from seq2seq.model import Transformer

EXPORT_SOURCE_EOS = "seq2seq_source_ends_with_eos"  # in config.json: the model reads a </s>


def interleaved_to_halves(d_model: int) -> Tensor:
    """The permutation ``perm`` with Marian coordinate j = our coordinate perm[j]."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def check_exportable(config: ModelConfig) -> None:
    """Marian has exactly the paper's layer: refuse what it cannot represent, by name."""
    paper = {
        "decoder_only": False,
        "norm_first": False,
        "norm": "layernorm",
        "positions": "sinusoidal",
        "bias": True,
    }
    for field, value in paper.items():
        if getattr(config, field) != value:
            raise ValueError(
                f"MarianMTModel has no equivalent of {field}={getattr(config, field)!r} "
                f"(export needs {field}={value!r})"
            )
    if config.activation not in ("relu", "gelu", "swish") or config.d_model % 2:
        raise ValueError("MarianMTModel export needs a relu/gelu/swish model with an even d_model")


def marian_rows(config: ModelConfig, tokenizer: Any) -> tuple[int, int]:
    """Marian's vocabulary size and padding id for our model.

    An imported OPUS-MT model (:mod:`seq2seq.tools.pretrained`) has a padding id appended after its
    vocabulary and Marian's ``<pad>`` as its start token; Marian pads with that start token,
    so the export drops the appended row. Our own models keep every row and their pad."""
    if tokenizer is not None and tokenizer.appended_pad:
        return config.vocab_size - 1, config.bos_id
    return config.vocab_size, config.pad_id


def marian_config(  # noqa: ANN201 (transformers type)
    config: ModelConfig, rows: int | None = None, pad_id: int | None = None, **overrides: Any
):
    """The ``MarianConfig`` of the same model: post-LN, tied and scaled embeddings; ``rows``
    and ``pad_id`` as :func:`marian_rows` gives them (default: ours)."""
    from transformers import MarianConfig

    rows = config.vocab_size if rows is None else rows
    pad_id = config.pad_id if pad_id is None else pad_id
    values = dict(
        vocab_size=rows,
        decoder_vocab_size=rows,
        d_model=config.d_model,
        encoder_layers=config.n_encoder_layers,
        decoder_layers=config.n_decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        activation_function=config.activation,
        max_position_embeddings=config.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=config.bos_id,
        eos_token_id=config.eos_id,
        decoder_start_token_id=config.bos_id,
        forced_eos_token_id=config.eos_id,
    )
    values.update(overrides)
    return MarianConfig(**values)


class _MarianWeights:
    """Collects our weights under Marian's names, in Marian's coordinate order: what reads the
    residual stream has its input columns permuted, what writes it its output rows."""

    def __init__(self, perm: Tensor) -> None:
        self.perm = perm
        self.weights: dict[str, Tensor] = {}

    def reads(self, w: Tensor) -> Tensor:
        """A Linear weight whose input is the residual stream."""
        return w[:, self.perm]

    def writes(self, w: Tensor) -> Tensor:
        """A Linear weight (or bias) whose output is the residual stream."""
        return w[self.perm]

    def layer_norm(self, prefix: str, norm) -> None:
        self.weights[f"{prefix}.weight"] = norm.weight[self.perm]
        self.weights[f"{prefix}.bias"] = norm.bias[self.perm]

    def attention_in(self, prefix: str, names: tuple[str, ...], weight: Tensor, bias: Tensor):
        """Our fused input projection (q, k, v or a part) split into Marian's separate ones."""
        for name, w, b in zip(names, weight.chunk(len(names)), bias.chunk(len(names)), strict=True):
            self.weights[f"{prefix}.{name}.weight"] = self.reads(w)  # output: head space, as is
            self.weights[f"{prefix}.{name}.bias"] = b

    def attention_out(self, prefix: str, out_proj) -> None:
        self.weights[f"{prefix}.out_proj.weight"] = self.writes(out_proj.weight)
        self.weights[f"{prefix}.out_proj.bias"] = self.writes(out_proj.bias)

    def self_attention(self, prefix: str, attn) -> None:
        qkv = attn.qkv_proj
        self.attention_in(prefix, ("q_proj", "k_proj", "v_proj"), qkv.weight, qkv.bias)
        self.attention_out(prefix, attn.out_proj)

    def cross_attention(self, prefix: str, cross) -> None:
        self.attention_in(prefix, ("q_proj",), cross.q_proj.weight, cross.q_proj.bias)
        kv = cross.kv_proj
        self.attention_in(prefix, ("k_proj", "v_proj"), kv.weight, kv.bias)
        self.attention_out(prefix, cross.out_proj)

    def feed_forward(self, prefix: str, ff) -> None:
        self.weights[f"{prefix}.fc1.weight"] = self.reads(ff.linear1.weight)
        self.weights[f"{prefix}.fc1.bias"] = ff.linear1.bias
        self.weights[f"{prefix}.fc2.weight"] = self.writes(ff.linear2.weight)
        self.weights[f"{prefix}.fc2.bias"] = self.writes(ff.linear2.bias)

    def encoder_layer(self, prefix: str, layer) -> None:
        self.self_attention(f"{prefix}.self_attn", layer.self_attn)
        self.layer_norm(f"{prefix}.self_attn_layer_norm", layer.norm1)
        self.feed_forward(prefix, layer.feed_forward)
        self.layer_norm(f"{prefix}.final_layer_norm", layer.norm2)

    def decoder_layer(self, prefix: str, layer) -> None:
        self.self_attention(f"{prefix}.self_attn", layer.self_attn)
        self.layer_norm(f"{prefix}.self_attn_layer_norm", layer.norm1)
        self.cross_attention(f"{prefix}.encoder_attn", layer.cross_attn)
        self.layer_norm(f"{prefix}.encoder_attn_layer_norm", layer.norm2)
        self.feed_forward(prefix, layer.feed_forward)
        self.layer_norm(f"{prefix}.final_layer_norm", layer.norm3)


def marian_state_dict(model: Transformer, rows: int | None = None) -> dict[str, Tensor]:
    """Our weights under Marian's names, in Marian's coordinate order (see module docstring);
    the first ``rows`` rows of the embedding (default all, see :func:`marian_rows`)."""
    perm = interleaved_to_halves(model.config.d_model)
    rows = model.config.vocab_size if rows is None else rows
    out = _MarianWeights(perm)
    out.weights["model.shared.weight"] = model.embedding.weight[:rows, perm]
    if model.embedding.bias is not None:
        out.weights["final_logits_bias"] = model.embedding.bias[None, :rows]
    for i, layer in enumerate(model.encoder.layers):
        out.encoder_layer(f"model.encoder.layers.{i}", layer)
    for i, layer in enumerate(model.decoder.layers):
        out.decoder_layer(f"model.decoder.layers.{i}", layer)
    return {name: w.detach().clone().contiguous() for name, w in out.weights.items()}


def to_marian(model: Transformer, tokenizer: Any = None):  # noqa: ANN201 (transformers type)
    """A ``MarianMTModel`` (eval mode) computing the same function as ``model``; with the
    ``tokenizer``, its config records whether sources end with eos."""
    from transformers import MarianMTModel

    check_exportable(model.config)
    rows, pad_id = marian_rows(model.config, tokenizer)
    marked = {} if tokenizer is None else {EXPORT_SOURCE_EOS: tokenizer.source_ends_with_eos}
    marian = MarianMTModel(marian_config(model.config, rows, pad_id, **marked)).eval()
    missing, unexpected = marian.load_state_dict(marian_state_dict(model, rows), strict=False)
    # Left to Marian: its own sinusoid tables, the tied encoder/decoder/output embeddings (the
    # same tensor as model.shared) and, without an output bias, the zero final_logits_bias.
    left = [n for n in missing if not n.endswith(("embed_positions.weight", "embed_tokens.weight"))]
    left = [n for n in left if n not in ("lm_head.weight", "final_logits_bias")]
    if left or unexpected:
        raise RuntimeError(f"weight mapping incomplete: missing {left}, unexpected {unexpected}")
    return marian
