"""The engines ``Translator`` drives: the seam between line handling and decoding.

An engine decodes batches of source ids into hypotheses; ``Translator``
(``seq2seq.inference.translator``) does everything around it (encoding, cutting, batching,
putting outputs back in order). ``Engine`` is what it needs; ``TorchEngine`` is our Transformer
with our searches, and ``CTranslate2Engine`` (``seq2seq.inference.ctranslate2_engine``) the
same over an exported model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch

from seq2seq.config import ModelConfig
from seq2seq.data.batching import pad_rows
from seq2seq.data.terms import term_tag_ids
from seq2seq.data.tokenizer import TokenizerLike, blank_ids, byte_piece_ids, symbol_ids
from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.decode import translate_ids, translation_prompt
from seq2seq.decoding.search import Hypothesis, SearchConfig, TokenRules
from seq2seq.decoding.shortlist import Shortlist, vocabulary_of
from seq2seq.decoding.utf8 import drop_broken_bytes
from seq2seq.inference.attention_maps import mean_cross_attention, self_attention_maps
from seq2seq.model import Transformer

# Tokens (rows x longest source + output) of one padded pass of ``TorchEngine.attentions``.
ATTENTION_TOKENS = 8192


def token_rules(tokenizer: TokenizerLike) -> TokenRules:
    """What our searches must know of ``tokenizer``'s pieces: those that write nothing visible
    (``blank_ids``), the term tags, never generated (``seq2seq.data.terms``), and the byte
    pieces, kept valid UTF-8 (``byte_piece_ids``)."""
    tags = term_tag_ids(tokenizer) or ()
    return TokenRules(
        blank=blank_ids(tokenizer),
        banned=tags,
        bytes=byte_piece_ids(tokenizer),
        term_tags=tags,
        symbols=symbol_ids(tokenizer),
    )


def read_shortlist(path: str | Path, tokenizer: TokenizerLike, config: ModelConfig) -> Shortlist:
    """A shortlist file (``seq2seq shortlist``) read with ``tokenizer``'s pieces, for a model of
    ``config`` (an encoder-decoder one: a one-line error otherwise)."""
    if config.decoder_only:
        raise ValueError(f"{path}: a shortlist is for encoder-decoder models, not decoder-only")
    pieces = vocabulary_of(tokenizer.id_to_piece, tokenizer.vocab_size)
    return Shortlist.read(path, pieces, config.vocab_size, config.eos_id)


def whole_characters(
    found: list[list[Hypothesis]], byte_ids: tuple[int, ...], engine: str
) -> list[list[Hypothesis]]:
    """Hypotheses without byte pieces that form no character (``utf8.drop_broken_bytes``):
    our searches write none but where eos is forced at the length limit, CTranslate2 takes no
    mask. How many were dropped is reported on stderr, one line per batch."""
    if not byte_ids:
        return found
    dropped = 0
    for hypotheses in found:
        for hypothesis in hypotheses:
            hypothesis.tokens, count = drop_broken_bytes(hypothesis.tokens, byte_ids)
            dropped += count
    if dropped:
        print(
            f"warning: {engine} wrote {dropped} byte piece(s) that form no UTF-8 character "
            "(a character cut at the length limit, or no mask in the engine); dropped",
            file=sys.stderr,
        )
    return found


class Engine(Protocol):
    """A runtime that decodes batches of source ids: what ``Translator`` needs."""

    search: SearchConfig
    device: str

    def hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int,
        n_best: int = 1,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` best outputs of each source (ids without bos/eos), best first;
        ``constraints``: what each output must hold (``seq2seq.decoding.constrained``)."""
        ...

    def source_limit(self) -> int:
        """Longest source (in tokens) the engine takes."""
        ...

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """Source tokens per batch for a ``max_tokens`` budget at this beam size."""
        ...

    def with_search(self, **changes: Any) -> Engine:
        """The same engine (sharing the model) with some search settings changed."""
        ...


class TorchEngine:
    """Our Transformer and our searches (``seq2seq.decoding.decode.translate_ids``)."""

    constrains = True  # has constrained beam search (glossaries)

    def __init__(
        self,
        model: Transformer,
        search: SearchConfig,
        rules: TokenRules = TokenRules(),  # noqa: B008 (frozen)
        shortlist: Shortlist | None = None,
    ) -> None:
        self.model = model.eval()
        self.search = search
        # The tokenizer's pieces no output is made of alone, and those never generated.
        self.rules = rules
        # Each sentence's candidate pieces (seq2seq.decoding.shortlist); None: the vocabulary.
        self.shortlist = shortlist

    @property
    def device(self) -> str:
        return str(self.model.embedding.weight.device)

    def hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int,
        n_best: int = 1,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        found = translate_ids(
            self.model,
            pad_rows(sources, self.model.config.pad_id).to(self.model.embedding.weight.device),
            beam_size,
            self.search,
            n_best,
            constraints,
            self.rules,
            self.shortlist,
        )
        return whole_characters(found, self.rules.bytes, "the search")

    def source_limit(self) -> int:
        """The model's positions; a decoder-only model holds source and translation in one
        sequence, so its sources leave room for the longest translation the search allows."""
        limit = self.model.config.max_positions
        if self.model.config.decoder_only:
            limit = self.search.source_limit(limit)
        return limit

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """Our search decodes beam_size rows per source."""
        return max(1, max_tokens // beam_size)

    def with_search(self, **changes: Any) -> TorchEngine:
        return TorchEngine(self.model, replace(self.search, **changes), self.rules, self.shortlist)

    def attention(self, source: list[int], target: list[int]) -> torch.Tensor:
        """Cross-attention of ``target`` (its tokens, then eos) over ``source``, mean over
        layers and heads: (T + 1, S). A decoder-only translator's is the self-attention of its
        target positions over its source positions."""
        model, config = self.model, self.model.config
        if not config.decoder_only:
            return mean_cross_attention(model, [(source, target)], ATTENTION_TOKENS)[0]
        prompt = translation_prompt(source, config)
        device = model.embedding.weight.device
        sequence = torch.tensor([prompt + target + [config.eos_id]], device=device)
        maps = self_attention_maps(model, sequence)
        # Position len(prompt) - 1 + t predicted target token t; the source is 1..|src|.
        rows = slice(len(prompt) - 1, len(prompt) + len(target))
        maps = [m[0, :, rows, 1 : 1 + len(source)] for m in maps]
        return torch.stack([m.float().mean(dim=0) for m in maps]).mean(dim=0).cpu()

    def attentions(self, pairs: list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
        """``attention`` of many (source, target) pairs: an encoder-decoder's in padded
        batches (one forward pass per batch, not per pair), a decoder-only model's one by one."""
        if self.model.config.decoder_only:
            return [self.attention(source, target) for source, target in pairs]
        return mean_cross_attention(self.model, pairs, ATTENTION_TOKENS)
