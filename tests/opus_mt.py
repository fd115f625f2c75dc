"""Small OPUS-MT-shaped ``MarianMTModel`` directories built offline, for the import tests.

Shaped like Helsinki-NLP/opus-mt-en-zh, only small: swish activation, static sinusoidal
positions, embeddings scaled and tied (encoder, decoder and output), a ``final_logits_bias``
that is not zero, eos 0 / unk 1 / target-language tokens / pieces / ``<pad>`` last, decoding
from ``<pad>``; a source SentencePiece model trained on the bundled HSK English and a target
one on its Chinese (no byte fallback, so rare characters are ``<unk>``, as in OPUS-MT), and a
``vocab.json`` joining both.
"""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

LANGUAGE_TOKENS = (">>cmn_Hans<<", ">>cmn_Hant<<", ">>yue<<")
MISSING_PIECE = 7  # this many source pieces are left out of vocab.json: they encode to <unk>


def hsk_pairs() -> list[tuple[str, str]]:
    """The bundled HSK sentences (hsk-sentences-audio, installed with the [corpus] extra)."""
    from seq2seq.data.sources import _load_hsk

    return _load_hsk()


def train_spm(texts: list[str], vocab_size: int, coverage: float) -> bytes:
    """A SentencePiece model as Marian's spm_train makes one: unk 0, bos 1, eos 2, no pad."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=coverage,
        minloglevel=2,
        num_threads=2,
    )
    return model.getvalue()


def marian_vocab(source: bytes, target: bytes) -> dict[str, int]:
    """eos 0, unk 1, the language tokens, every piece of both models once, ``<pad>`` last."""
    pieces = ["</s>", "<unk>", *LANGUAGE_TOKENS]
    for proto in (source, target):
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [
            sp.id_to_piece(i)
            for i in range(sp.get_piece_size())
            if not sp.is_control(i) and not sp.is_unknown(i)
        ]
    unique = list(dict.fromkeys(pieces))
    # A few source pieces the vocabulary lacks (they encode to <unk>, as MarianTokenizer does).
    dropped = set(unique[len(LANGUAGE_TOKENS) + 10 : len(LANGUAGE_TOKENS) + 10 + MISSING_PIECE])
    kept = [p for p in unique if p not in dropped] + ["<pad>"]
    return {piece: i for i, piece in enumerate(kept)}


@functools.cache
def spm_models() -> tuple[bytes, bytes]:
    """Source (English) and target (Chinese) SentencePiece models of the HSK sentences."""
    pairs = hsk_pairs()
    return train_spm([en for en, _ in pairs], 400, 1.0), train_spm(
        [zh for _, zh in pairs], 1600, 0.98
    )


def build_opus_mt_like(directory: Path, seed: int = 0, **overrides) -> Path:
    """Write a small OPUS-MT-shaped model with its tokenizer files into ``directory``."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    source, target = spm_models()
    vocab = marian_vocab(source, target)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), "utf-8")
    size, pad = len(vocab), vocab["<pad>"]
    values = dict(
        vocab_size=size,
        decoder_vocab_size=size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        max_position_embeddings=128,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        dropout=0.1,
        init_std=0.3,
    )
    values.update(overrides)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**values)).eval()
    with torch.no_grad():  # a bias that matters, as OPUS-MT's does (zero at <pad>)
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, pad] = 0.0
    model.generation_config.bad_words_ids = [[pad]]  # as OPUS-MT's generation config
    model.save_pretrained(directory)
    tokenizer = MarianTokenizer(
        str(directory / "source.spm"),
        str(directory / "target.spm"),
        str(directory / "vocab.json"),
        source_lang="en",
        target_lang="zh",
    )
    tokenizer.save_pretrained(directory)
    return directory
