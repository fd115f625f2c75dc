"""Start from a pretrained model: import a Hugging Face ``MarianMTModel`` (OPUS-MT) exactly.

OPUS-MT models are our architecture: post-LN, sinusoidal positions, one embedding shared by
source, target and output, scaled by sqrt(d_model). The import is the inverse of the export's
mapping (:mod:`seq2seq.tools.marian_weights`: the same renaming and the inverse change of basis
between Marian's sines-then-cosines coordinates and our interleaved ones), plus what real OPUS-MT
models carry, all read from their files:

* the feed-forward activation (``swish``, i.e. SiLU, in OPUS-MT models);
* ``final_logits_bias``, a bias on the tied output projection (``ModelConfig.output_bias``);
* Marian's vocabulary layout: eos 0, unk 1, ``<pad>`` last, and decoding that starts from
  ``<pad>`` (its embedding is zero). Our padding id must differ from the start token (padding
  masks would hide it), so an import keeps Marian's ``<pad>`` row as its ``bos`` and appends
  one padding id after the vocabulary: a zero embedding row and an output bias of
  :data:`APPENDED_PAD_BIAS`, whose share of the softmax is below float precision, so
  probabilities are Marian's. Our searches never emit pad, unk or bos.
* the tokenizer: two SentencePiece models over one vocabulary, and the target-language token
  of multi-target models, stored in the checkpoint
  (:class:`~seq2seq.data.paired_tokenizer.PairedTokenizer`).

Models that are not this architecture are refused with a one-line error: separate source and
target vocabularies, untied output projections, unscaled embeddings, an activation we lack,
or encoder and decoder of different widths.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seq2seq.config import ModelConfig
from seq2seq.data.paired_tokenizer import PairedTokenizer
from seq2seq.data.tokenizer import Tokenizer, TokenizerLike
from seq2seq.decoding.search import SearchConfig
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, atomic_save, checkpoint_section
from seq2seq.tools.marian_weights import EXPORT_SOURCE_EOS, interleaved_to_halves

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
APPENDED_PAD_BIAS = -100.0  # exp(-100) ~ 4e-44: the appended padding id takes no probability


def import_marian(source: str, output: str | Path, target_token: str | None = None) -> Path:
    """Write one of our checkpoints holding the ``MarianMTModel`` in ``source``.

    Args:
        source: a ``save_pretrained`` directory (config, weights, ``source.spm``,
            ``target.spm``, ``vocab.json``) or a hub name such as
            ``Helsinki-NLP/opus-mt-en-zh`` (downloaded by transformers, where the network
            allows).
        output: the ``.ckpt`` to write.
        target_token: the target-language token every source starts with, for models with
            several target languages (e.g. ``>>cmn_Hans<<`` for opus-mt-en-zh).

    Raises:
        CheckpointError: the model cannot be loaded, or has a form we cannot represent.
    """
    marian, hf_tokenizer = _load(source)
    check_importable(source, marian, hf_tokenizer)
    ids = special_ids(marian.config, hf_tokenizer)
    bias = marian.final_logits_bias.detach()[0]
    config = model_config(marian.config, ids, output_bias=ids["appended_pad"] or bool(bias.any()))
    tokenizer = _tokenizer(source, hf_tokenizer, ids, target_token, marian.config)
    weights = weights_from_marian(marian.state_dict(), config, ids["appended_pad"])
    # No truecase forms: OPUS-MT reads case itself, and a checkpoint without learnt forms is
    # read as written (seq2seq.data.truecase), so the import translates as Marian does.
    section = checkpoint_section(
        config, SearchConfig(), tokenizer.to_bytes(), "translation", tokenizer.source_ends_with_eos
    )
    state_dict = {f"model.{name}": tensor for name, tensor in weights.items()}
    checkpoint = {"state_dict": state_dict, CHECKPOINT_KEY: section, "imported_from": source}
    atomic_save(checkpoint, output)
    return Path(output)


def _load(source: str) -> tuple[Any, Any]:
    """``MarianMTModel`` and ``MarianTokenizer`` of ``source`` (transformers' own loaders)."""
    try:
        import transformers
        from transformers import AutoConfig, MarianMTModel, MarianTokenizer
    except ImportError:
        raise CheckpointError("import needs transformers: pip install 'seq2seq[export]'") from None
    transformers.logging.set_verbosity_error()
    if Path(source).is_dir():  # nothing to download: no bars for reading local weights
        transformers.logging.disable_progress_bar()
    # MarianTokenizer recommends sacremoses for a normaliser that its tokenization never calls.
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    try:
        kind = AutoConfig.from_pretrained(source).model_type
    except (OSError, ValueError) as error:
        raise CheckpointError(
            f"{source}: cannot read a model config ({_first_line(error)})"
        ) from None
    if kind != "marian":
        raise CheckpointError(f"{source}: a {kind!r} model; import reads MarianMTModel (marian)")
    try:
        model = MarianMTModel.from_pretrained(source).eval()
        tokenizer = MarianTokenizer.from_pretrained(source)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{source}: cannot load it ({_first_line(error)})") from None
    return model, tokenizer


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def check_importable(source: str, marian: Any, tokenizer: Any) -> None:
    """Refuse, by name, what our model cannot represent exactly."""
    c = marian.config

    def refuse(problem: str) -> None:
        raise CheckpointError(f"{source}: cannot import: {problem}")

    if not getattr(c, "share_encoder_decoder_embeddings", True) or tokenizer.separate_vocabs:
        refuse("source and target have separate vocabularies (our model has one shared one)")
    if getattr(c, "decoder_vocab_size", None) not in (None, c.vocab_size):
        refuse(
            f"the decoder's vocabulary ({c.decoder_vocab_size}) differs from the encoder's "
            f"({c.vocab_size})"
        )
    if len(tokenizer.encoder) != c.vocab_size:
        refuse(f"vocab.json has {len(tokenizer.encoder)} entries, the model {c.vocab_size}")
    if not c.scale_embedding:
        refuse("embeddings are not scaled by sqrt(d_model) (scale_embedding false)")
    if c.activation_function not in ACTIVATIONS:
        refuse(f"activation {c.activation_function!r} (we have {', '.join(ACTIVATIONS)})")
    if (c.encoder_attention_heads, c.encoder_ffn_dim) != (
        c.decoder_attention_heads,
        c.decoder_ffn_dim,
    ):
        refuse("encoder and decoder differ in heads or feed-forward width")
    if c.d_model % 2:
        refuse(f"odd d_model {c.d_model}")
    shared, inner = marian.model.shared.weight, marian.model
    tied = {
        "the output projection": marian.lm_head.weight,
        "the encoder embedding": inner.encoder.embed_tokens.weight,
        "the decoder embedding": inner.decoder.embed_tokens.weight,
    }
    for name, weight in tied.items():
        if not torch.equal(weight, shared):
            refuse(f"{name} is not tied to the shared embedding")


def special_ids(config: Any, tokenizer: Any) -> dict[str, Any]:
    """Our special ids for a Marian vocabulary (see the module docstring)."""
    pad = config.pad_token_id
    start = pad if config.decoder_start_token_id is None else config.decoder_start_token_id
    appended_pad = start == pad  # Marian's layout: decoding starts from <pad>
    return {
        "eos": config.eos_token_id,
        "unk": tokenizer.encoder[str(tokenizer.unk_token)],
        "bos": start,
        "pad": config.vocab_size if appended_pad else pad,
        "appended_pad": appended_pad,
    }


def model_config(config: Any, ids: dict[str, Any], output_bias: bool) -> ModelConfig:
    """Our ``ModelConfig`` for a ``MarianConfig``."""
    return ModelConfig(
        vocab_size=config.vocab_size + int(ids["appended_pad"]),
        d_model=config.d_model,
        n_heads=config.encoder_attention_heads,
        n_encoder_layers=config.encoder_layers,
        n_decoder_layers=config.decoder_layers,
        d_ff=config.encoder_ffn_dim,
        dropout=float(config.dropout),
        attention_dropout=float(config.attention_dropout),
        activation_dropout=float(config.activation_dropout),
        activation=ACTIVATIONS[config.activation_function],
        output_bias=output_bias,
        max_positions=config.max_position_embeddings,
        pad_id=ids["pad"],
        unk_id=ids["unk"],
        bos_id=ids["bos"],
        eos_id=ids["eos"],
    )


def _tokenizer(
    source: str,
    hf_tokenizer: Any,
    ids: dict[str, Any],
    target_token: str | None,
    marian_config: Any,
) -> TokenizerLike:
    """The checkpoint's tokenizer: a model our own export wrote gets its SentencePiece model
    back, its sources ending with eos as the export's config records (an export written
    before it recorded that came from a model trained without); any other a
    :class:`PairedTokenizer`."""
    source_model, target_model = (Path(f).read_bytes() for f in hf_tokenizer.spm_files)
    ours = _our_export_tokenizer(source_model, target_model, hf_tokenizer.encoder, ids)
    if ours is not None and target_token is None:
        ours.source_ends_with_eos = bool(getattr(marian_config, EXPORT_SOURCE_EOS, False))
        return ours
    specials = {name: ids[name] for name in ("pad", "unk", "bos", "eos")}
    try:
        tokenizer = PairedTokenizer(
            source_model, target_model, hf_tokenizer.encoder, specials, target_token
        )
    except ValueError as error:
        raise CheckpointError(f"{source}: {error}") from None
    codes = tokenizer.language_tokens()
    if codes and target_token is None:
        shown = ", ".join(codes[:8]) + (", ..." if len(codes) > 8 else "")
        raise CheckpointError(
            f"{source}: this model translates into several languages: choose "
            f"one with --target-token (one of {shown})"
        )
    return tokenizer


def _our_export_tokenizer(
    source_model: bytes, target_model: bytes, vocab: dict[str, int], ids: dict[str, Any]
) -> Tokenizer | None:
    """Our SentencePiece tokenizer, when the files are the ones ``seq2seq export`` writes: one
    model for both sides whose pieces are ``vocab.json`` id for id, with our special ids."""
    if source_model != target_model or ids["appended_pad"]:
        return None
    try:
        tokenizer = Tokenizer(source_model)
    except (ValueError, RuntimeError):
        return None
    same = tokenizer.vocab_size == len(vocab) and all(
        vocab.get(tokenizer.id_to_piece(i)) == i for i in range(tokenizer.vocab_size)
    )
    ours = (ids["pad"], ids["unk"], ids["bos"], ids["eos"]) == (
        tokenizer.pad_id,
        tokenizer.unk_id,
        tokenizer.bos_id,
        tokenizer.eos_id,
    )
    return tokenizer if same and ours else None


def weights_from_marian(
    marian: dict[str, Tensor], config: ModelConfig, appended_pad: bool
) -> dict[str, Tensor]:
    """Marian's weights under our names and in our coordinate order: the inverse of
    :func:`seq2seq.tools.marian_weights.marian_state_dict`."""
    inverse = torch.argsort(interleaved_to_halves(config.d_model))  # Marian coords -> ours
    ours: dict[str, Tensor] = {}

    def reads(w: Tensor) -> Tensor:  # a Linear whose input is the residual stream
        return w[:, inverse]

    def writes(w: Tensor) -> Tensor:  # a Linear weight (or bias) whose output is the stream
        return w[inverse]

    def layer_norm(ours_name: str, marian_name: str) -> None:
        for part in ("weight", "bias"):
            ours[f"{ours_name}.{part}"] = writes(marian[f"{marian_name}.{part}"])

    def attention_in(ours_name: str, marian_name: str, projections: tuple[str, ...]) -> None:
        ours[f"{ours_name}.weight"] = torch.cat(
            [reads(marian[f"{marian_name}.{p}.weight"]) for p in projections]
        )
        ours[f"{ours_name}.bias"] = torch.cat(
            [marian[f"{marian_name}.{p}.bias"] for p in projections]
        )

    def attention_out(ours_name: str, marian_name: str) -> None:
        ours[f"{ours_name}.weight"] = writes(marian[f"{marian_name}.out_proj.weight"])
        ours[f"{ours_name}.bias"] = writes(marian[f"{marian_name}.out_proj.bias"])

    def feed_forward(ours_name: str, marian_name: str) -> None:
        ours[f"{ours_name}.linear1.weight"] = reads(marian[f"{marian_name}.fc1.weight"])
        ours[f"{ours_name}.linear1.bias"] = marian[f"{marian_name}.fc1.bias"]
        ours[f"{ours_name}.linear2.weight"] = writes(marian[f"{marian_name}.fc2.weight"])
        ours[f"{ours_name}.linear2.bias"] = writes(marian[f"{marian_name}.fc2.bias"])

    _embedding(ours, marian, config, appended_pad, reads)
    for i in range(config.n_encoder_layers):
        p, m = f"encoder.layers.{i}", f"model.encoder.layers.{i}"
        attention_in(f"{p}.self_attn.qkv_proj", f"{m}.self_attn", ("q_proj", "k_proj", "v_proj"))
        attention_out(f"{p}.self_attn.out_proj", f"{m}.self_attn")
        layer_norm(f"{p}.norm1", f"{m}.self_attn_layer_norm")
        feed_forward(f"{p}.feed_forward", m)
        layer_norm(f"{p}.norm2", f"{m}.final_layer_norm")
    for i in range(config.n_decoder_layers):
        p, m = f"decoder.layers.{i}", f"model.decoder.layers.{i}"
        attention_in(f"{p}.self_attn.qkv_proj", f"{m}.self_attn", ("q_proj", "k_proj", "v_proj"))
        attention_out(f"{p}.self_attn.out_proj", f"{m}.self_attn")
        layer_norm(f"{p}.norm1", f"{m}.self_attn_layer_norm")
        attention_in(f"{p}.cross_attn.q_proj", f"{m}.encoder_attn", ("q_proj",))
        attention_in(f"{p}.cross_attn.kv_proj", f"{m}.encoder_attn", ("k_proj", "v_proj"))
        attention_out(f"{p}.cross_attn.out_proj", f"{m}.encoder_attn")
        layer_norm(f"{p}.norm2", f"{m}.encoder_attn_layer_norm")
        feed_forward(f"{p}.feed_forward", m)
        layer_norm(f"{p}.norm3", f"{m}.final_layer_norm")
    return {name: w.detach().clone().contiguous() for name, w in ours.items()}


def _embedding(ours: dict, marian: dict, config: ModelConfig, appended_pad: bool, reads) -> None:
    """The shared embedding and the output bias; an appended padding id gets a zero row and
    a bias that keeps it out of the softmax."""
    embedding = reads(marian["model.shared.weight"])  # (V, d)
    bias = marian["final_logits_bias"][0]  # (V,)
    if appended_pad:
        embedding = torch.cat([embedding, embedding.new_zeros(1, config.d_model)])
        bias = torch.cat([bias, bias.new_full((1,), APPENDED_PAD_BIAS)])
    ours["embedding.weight"] = embedding
    if config.output_bias:
        ours["embedding.bias"] = bias
