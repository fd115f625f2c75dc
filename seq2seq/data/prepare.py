"""Preparation: corpus → clean → split → tokenizer → token ids, written once to a cache.

The slow work runs once; later runs (and other ranks) only read the cache directory
``cache_dir/<prefix><corpus kind>-<hash>/`` (:func:`cache_name`: the hash covers every setting
that changes what is written). A translation cache holds::

    spm.model                       joint SentencePiece model (or the given tokenizer's bytes)
    {train,dev,test}/               token ids, :class:`TokenizedPairs`: flat ids src.npy and
                                    tgt.npy with src_offsets.npy, tgt_offsets.npy; each pair's
                                    batching cost lengths.npy and the length order order.npy
    {train,dev,test}.{en,zh}        cleaned text, one sentence per line (BLEU references)
    report.json                     counts: raw, cleaning drops, split sizes, too-long drops

and a language model's (prefix ``lm-``) holds ``spm.model``, ``{split}/blocks.npy`` with the
packed blocks, (n_blocks, block_size + 1) int32 (:func:`seq2seq.data.lm.pack_flat`),
``{split}.txt`` (the cleaned documents) and ``report.json``.

Translation pairs are prepared on Arrow tables with ``datasets`` (:mod:`seq2seq.data.tables`):
memory stays flat at any corpus size, and cleaning and tokenizing run in ``num_proc``
processes. Every array is a plain ``.npy`` file that readers map (``mmap_mode="r"``), so the
ranks of one machine share one copy of the ids in the page cache.

This module holds what every preparation shares: the settings (:class:`PrepareSettings`), the
cache's name (:func:`cache_name`), the pipeline's version and the stages both pipelines run
(training the tokenizer, writing each split's text, encoding in worker processes). The
pipelines themselves are :func:`seq2seq.data.pair_pipeline.prepare_pairs` and
:func:`seq2seq.data.block_pipeline.prepare_blocks`; the cache directory on disk (built
atomically, read back) is :mod:`seq2seq.data.cache_dir`, and :class:`TokenizedPairs` is in
:mod:`seq2seq.data.tokenized_pairs`. Which pipeline runs and which settings enter the hash is
the layout's choice (:mod:`seq2seq.data.layouts`); nothing here imports Lightning. Each stage
of a pipeline logs one INFO line to :data:`log` (the big corpora take minutes); whoever
prepares the data decides where the lines go (see ``prepare_data``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data import tables
from seq2seq.data.cache_dir import fingerprint
from seq2seq.data.modifiers import Modifiers
from seq2seq.data.sources import CorpusSpec
from seq2seq.data.split import SPLITS
from seq2seq.data.tokenizer import Tokenizer, TokenizerLike, tokenizer_from_bytes

CACHE_VERSION = 3  # bump when the cached format or the pipeline's output changes
# (2: byte-fallback tokenizer; an English sentence in one split only; no HSK placeholders;
# 3: sources end with </s>; memory-mapped .npy arrays per split)
TOKENIZER_SENTENCES = 200_000  # SentencePiece trains on at most this many sentences

# One line per stage of a preparation. Both pipelines log here (under this module's name,
# which is where the data module and the tests look for the lines).
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PrepareSettings:
    """Every data-module argument that can change the cache; each layout reads its own.

    ``max_len_chars``, ``max_ratio`` and ``max_len`` concern translation pairs; ``lm_side``,
    ``text_field`` and ``block_size`` the language model. See ``TranslationDataModule``.
    ``num_proc`` (worker processes) changes how fast, never what is written.
    """

    spec: CorpusSpec
    vocab_size: int
    spm_model_type: str
    seed: int
    max_len_chars: int
    max_ratio: float
    max_len: int
    lm_side: str
    text_field: str | None
    block_size: int
    tokenizer: bytes | None = None
    tokenizer_source_eos: bool = True  # the given tokenizer's convention (see Tokenizer)
    num_proc: int = 1
    modifiers: Modifiers = Modifiers()  # training-time modifiers (translation pairs only)

    def tokenizer_key(self) -> list[Any]:
        """The settings that change the tokenizer: a given one's bytes (fine-tuning a
        checkpoint), or those of the SentencePiece model trained otherwise."""
        if self.tokenizer is not None:
            digest = hashlib.sha256(self.tokenizer).hexdigest()
            return ["given", digest] + ([] if self.tokenizer_source_eos else ["no source eos"])
        return [self.vocab_size, self.spm_model_type, self.seed]


def cache_name(settings: PrepareSettings, layout_key: dict[str, Any], prefix: str = "") -> str:
    """``<prefix><corpus kind>-<16 hex digits>``: a hash of the pipeline version, the corpus
    (its files by path, size and mtime) and the layout's own settings ``layout_key``."""
    spec = settings.spec
    key = {
        "version": CACHE_VERSION,
        "spec": dataclasses.asdict(spec),
        "files": [fingerprint(path) for path in (spec.path, spec.tgt_path) if path],
        **layout_key,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return f"{prefix}{spec.kind}-{digest}"


def sizes(splits: dict[str, list]) -> str:
    """``train 9,600, dev 120, test 118``."""
    return ", ".join(f"{name} {len(split):,}" for name, split in splits.items())


def train_tokenizer(
    texts: list[str], settings: PrepareSettings, user_symbols: Sequence[str] = ()
) -> tuple[TokenizerLike, float]:
    """The joint tokenizer trained on ``texts``, and the seconds it took; the given one
    (``settings.tokenizer``, when fine-tuning a checkpoint) as it is."""
    if settings.tokenizer is not None:
        log.info("tokenizer: the given one (data.tokenizer_from), not trained")
        return tokenizer_from_bytes(settings.tokenizer, settings.tokenizer_source_eos), 0.0
    log.info(f"training the tokenizer: {settings.vocab_size:,} pieces on {len(texts):,} texts")
    start = time.perf_counter()
    tokenizer = Tokenizer.train(
        texts,
        settings.vocab_size,
        settings.spm_model_type,
        seed=settings.seed,
        user_symbols=user_symbols,
    )
    return tokenizer, round(time.perf_counter() - start, 2)


def split_of_row(rows: dict[str, np.ndarray], n_rows: int) -> np.ndarray:
    """(n_rows,) int8: each row's index in :data:`SPLITS`, -1 for rows in none."""
    split_of_row = np.full(n_rows, -1, dtype=np.int8)
    for code, name in enumerate(SPLITS):
        split_of_row[rows[name]] = code
    return split_of_row


def write_split_texts(
    table: Any, split_of_row: np.ndarray, suffixes: dict[str, str], out: Path
) -> None:
    """Each split's rows of the text ``columns``, one per line, into ``out/<split>.<suffix>``
    (lines as :func:`seq2seq.textio.write_lines` writes them), in one streamed pass."""
    paths = {
        (name, column): out / f"{name}.{suffix}"
        for name in SPLITS
        for column, suffix in suffixes.items()
    }
    files = {key: path.open("w", encoding="utf-8", newline="\n") for key, path in paths.items()}
    try:
        start = 0
        for batch in tables.record_batches(table, list(suffixes)):
            codes = split_of_row[start : start + batch.num_rows]
            for code, name in enumerate(SPLITS):
                taken = batch.take(np.flatnonzero(codes == code))
                for column in suffixes:
                    lines = taken.column(column).to_pylist()
                    files[name, column].write("".join(line + "\n" for line in lines))
            start += batch.num_rows
    finally:
        for file in files.values():
            file.close()


class Encode:
    """A batched map to token ids; picklable, so ``datasets`` can hand it to worker processes,
    each building the tokenizer (from its bytes) once."""

    def __init__(self, tokenizer_bytes: bytes, source_ends_with_eos: bool = False) -> None:
        self.tokenizer_bytes, self.source_ends_with_eos = tokenizer_bytes, source_ends_with_eos
        self._tokenizer: TokenizerLike | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}

    @property
    def tokenizer(self) -> TokenizerLike:
        if self._tokenizer is None:
            self._tokenizer = tokenizer_from_bytes(self.tokenizer_bytes, self.source_ends_with_eos)
        return self._tokenizer


def sample_rows(rows: np.ndarray, most: int, seed: int) -> np.ndarray:
    """``rows`` if there are at most ``most``, else a sorted random sample of ``most`` of them."""
    if len(rows) <= most:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, most, replace=False))
