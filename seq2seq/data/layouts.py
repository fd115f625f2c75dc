"""How examples are laid out for the model: one object per layout, chosen once by
:func:`choose_layout` from the data module's ``task`` and ``decoder_only``.

- :class:`PairLayout` (``task: translation``): an example is ``(src_ids, tgt_ids)``; a batch
  feeds ``src`` (B, S) to the encoder, ``tgt_in`` = ``[bos] tgt`` and ``tgt_out`` =
  ``tgt [eos]`` (B, T + 1) to the decoder.
- :class:`JoinedPairLayout` (``task: translation``, ``decoder_only``): the same pairs, fed to
  a decoder-only model as one sequence ``tgt_in`` = ``[bos] src [sep] tgt`` (B, S + T + 2),
  the loss on the target only.
- :class:`BlockLayout` (``task: lm``): an example is a (block_size + 1,) int32 block of packed
  text; ``tgt_in`` = ``block[:-1]``, ``tgt_out`` = ``block[1:]`` (B, block_size).

(S, T: the longest source and target in the batch.) Each layout names its cache (which settings
are hashed), builds it (a pipeline: :mod:`seq2seq.data.pair_pipeline` or
:mod:`seq2seq.data.block_pipeline`), loads a split's dataset, gives each example's length for
the token-budget sampler and collates examples into a :class:`~seq2seq.data.batching.Batch`.
Nothing here imports Lightning.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data.batching import (
    Batch,
    collate,
    collate_blocks,
    collate_joined,
    joined_length,
)
from seq2seq.data.block_pipeline import prepare_blocks
from seq2seq.data.cache_dir import read_split_texts
from seq2seq.data.clean import CleanReport
from seq2seq.data.lm import TokenBlocks
from seq2seq.data.pair_pipeline import prepare_pairs
from seq2seq.data.prepare import PrepareSettings, cache_name
from seq2seq.data.tokenized_pairs import TokenizedPairs
from seq2seq.data.tokenizer import SEP, TokenizerLike
from seq2seq.errors import ConfigError

TASKS = ("translation", "lm")

Dataset = TokenizedPairs | TokenBlocks
Collate = Callable[[Sequence[Any]], Batch]


class Layout(ABC):
    """What the data module asks of a layout (each method is one step of its life)."""

    cache_prefix = ""  # before the corpus kind in the cache directory's name

    def cache_name(self, settings: PrepareSettings) -> str:
        """The cache directory's name for ``settings``."""
        return cache_name(settings, self.cache_key(settings), self.cache_prefix)

    @abstractmethod
    def cache_key(self, settings: PrepareSettings) -> dict[str, Any]:
        """The settings that change this layout's cache (hashed into its name)."""

    @abstractmethod
    def check_budget(self, max_tokens: int, settings: PrepareSettings) -> None:
        """Raises unless a batch of ``max_tokens`` can hold the longest example."""

    @abstractmethod
    def build(self, out: Path, settings: PrepareSettings) -> None:
        """Runs the preparation pipeline, writing every cache file into ``out``."""

    @abstractmethod
    def load(self, directory: Path) -> Dataset:
        """A split's dataset from its directory in the cache, memory-mapped."""

    @abstractmethod
    def lengths(self, data: Dataset) -> np.ndarray:
        """Each example's padded-size cost, for the token-budget sampler."""

    def order(self, data: Dataset) -> np.ndarray | None:
        """The examples sorted by :meth:`lengths` (stable), when the cache stores it (then
        every rank maps one copy instead of sorting its own); None: the sampler sorts."""
        return None

    @abstractmethod
    def collate(self, tokenizer: TokenizerLike) -> Collate | None:
        """Builds a batch from examples (None: the loader's default pair collation)."""

    @abstractmethod
    def summary(self, report: dict[str, Any], settings: PrepareSettings) -> str:
        """The cache's report in one line, for the log."""

    @abstractmethod
    def split_texts(self, cache: Path, split: str) -> tuple[list[str], list[str]]:
        """Cleaned (english, chinese) sentences of ``split``, for BLEU."""


class PairLayout(Layout):
    """Sentence pairs for an encoder-decoder model: source to the encoder, target decoded."""

    def cache_key(self, settings: PrepareSettings) -> dict[str, Any]:
        return {
            "clean": [settings.max_len_chars, settings.max_ratio],
            "tokenizer": settings.tokenizer_key(),
            "max_len": settings.max_len,
            **settings.modifiers.cache_key(),  # nothing when none is on: old caches stay
            # The modifiers draw from the seed; a trained tokenizer's key holds it already,
            # a given one's (fine-tuning) does not.
            **(
                {"modifier_seed": settings.seed}
                if settings.modifiers.active and settings.tokenizer is not None
                else {}
            ),
        }

    def check_budget(self, max_tokens: int, settings: PrepareSettings) -> None:
        max_len = settings.max_len
        if max_tokens < self.pair_length(max_len, max_len):
            raise ValueError(f"max_tokens={max_tokens} cannot hold one pair of max_len={max_len}")

    def pair_length(self, src_len: Any, tgt_len: Any) -> Any:
        """Padded-size cost of pairs with sides of these lengths (ints, or arrays of them):
        :func:`~seq2seq.data.batching.example_length`."""
        return np.maximum(src_len, tgt_len) + 1

    def build(self, out: Path, settings: PrepareSettings) -> None:
        # Sources end with </s>, as Marian and fairseq train encoder-decoder models.
        prepare_pairs(out, settings, self.pair_length, source_ends_with_eos=True)

    def load(self, directory: Path) -> TokenizedPairs:
        return TokenizedPairs.load(directory)

    def lengths(self, data: Dataset) -> np.ndarray:
        if data.stored_lengths is not None:
            return data.stored_lengths
        return self.pair_length(data.side_lengths("src"), data.side_lengths("tgt"))

    def order(self, data: Dataset) -> np.ndarray | None:
        return data.stored_order

    def collate(self, tokenizer: TokenizerLike) -> Collate | None:
        return partial(
            collate, pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id
        )

    def summary(self, report: dict[str, Any], settings: PrepareSettings) -> str:
        return (
            f"data: {report['corpus']}: {CleanReport(**report['clean'])}; "
            f"split {report['split']}; dropped over max_len={settings.max_len} tokens "
            f"{report['too_long']}"
        )

    def split_texts(self, cache: Path, split: str) -> tuple[list[str], list[str]]:
        return read_split_texts(cache, split)


class JoinedPairLayout(PairLayout):
    """Sentence pairs for a decoder-only model, each joined into ``[bos] src [sep] tgt`` with
    the loss on the target only (:func:`~seq2seq.data.batching.collate_joined`)."""

    def cache_key(self, settings: PrepareSettings) -> dict[str, Any]:
        key = super().cache_key(settings)
        # The vocabulary gains a <sep> piece. Added only here, so that an encoder-decoder
        # run keeps the cache it had before decoder-only models existed.
        key["tokenizer"] = [*key["tokenizer"], SEP]
        return key

    def pair_length(self, src_len: Any, tgt_len: Any) -> Any:
        return joined_length(src_len, tgt_len)

    def build(self, out: Path, settings: PrepareSettings) -> None:
        # No </s> inside [bos] src [sep] tgt: <sep> ends the source.
        prepare_pairs(out, settings, self.pair_length, (SEP,), source_ends_with_eos=False)

    def collate(self, tokenizer: TokenizerLike) -> Collate:
        return partial(collate_joined, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)


class BlockLayout(Layout):
    """Monolingual text packed into blocks for a decoder-only language model
    (:mod:`seq2seq.data.lm`)."""

    cache_prefix = "lm-"

    def cache_key(self, settings: PrepareSettings) -> dict[str, Any]:
        # No cleaning limits or max_len: documents are packed whatever their length.
        return {
            "tokenizer": settings.tokenizer_key(),
            "lm": [settings.lm_side, settings.text_field, settings.block_size],
        }

    def check_budget(self, max_tokens: int, settings: PrepareSettings) -> None:
        block_size = settings.block_size
        if max_tokens < block_size + 1:
            raise ConfigError(f"max_tokens={max_tokens} cannot hold one block of {block_size} + 1")

    def build(self, out: Path, settings: PrepareSettings) -> None:
        prepare_blocks(out, settings)

    def load(self, directory: Path) -> TokenBlocks:
        return TokenBlocks(np.load(directory / "blocks.npy", mmap_mode="r"))

    def lengths(self, data: Dataset) -> np.ndarray:
        return data.lengths()

    def collate(self, tokenizer: TokenizerLike) -> Collate:
        return partial(collate_blocks, pad_id=tokenizer.pad_id)

    def summary(self, report: dict[str, Any], settings: PrepareSettings) -> str:
        return (
            f"data (language model): {report['corpus']}: {report['clean']}; documents "
            f"{report['split']}; blocks of {settings.block_size} {report['blocks']}; tokens "
            f"{report['tokens']}"
        )

    def split_texts(self, cache: Path, split: str) -> tuple[list[str], list[str]]:
        raise ValueError("a language model's data has no translation pairs")


def choose_layout(task: str, decoder_only: bool) -> Layout:
    """The layout for a data module's ``task`` and ``decoder_only`` arguments.

    Raises:
        ConfigError: an unknown task, or ``task: lm`` without a decoder-only model.
    """
    if task not in TASKS:
        raise ConfigError(f"data.task must be one of {TASKS}, got {task!r}")
    if task == "lm":
        if not decoder_only:
            raise ConfigError("data.task 'lm' needs a decoder-only model (decoder_only: true)")
        return BlockLayout()
    return JoinedPairLayout() if decoder_only else PairLayout()
