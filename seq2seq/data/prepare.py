"""Preparation: corpus → clean → split → tokenizer → token ids, written once to a cache.

The slow work runs once; later runs (and other ranks) only read the cache directory
``cache_dir/<prefix><corpus kind>-<hash>/`` (:func:`cache_name`: the hash covers every setting
that changes what is written). A translation cache holds::

    spm.model                       joint SentencePiece model (or the given tokenizer's bytes)
    train.npz dev.npz test.npz      token ids, :class:`TokenizedPairs` (flat int32 ids + offsets)
    {train,dev,test}.{en,zh}        cleaned text, one sentence per line (BLEU references)
    report.json                     counts: raw, cleaning drops, split sizes, too-long drops

and a language model's (prefix ``lm-``) holds ``spm.model``, ``{split}.npz`` with the packed
blocks, ``blocks``: (n_blocks, block_size + 1) int32 (:func:`seq2seq.data.lm.pack_blocks`),
``{split}.txt`` (the cleaned documents) and ``report.json``.

:func:`build_atomically` writes the directory under a temporary name and renames it into place,
so a crash never leaves a half-written cache behind. Which pipeline runs and which settings
enter the hash is the layout's choice (:mod:`seq2seq.data.layouts`); nothing here imports
Lightning. Each stage of a pipeline logs one INFO line to :data:`log` (the big corpora take
minutes); whoever prepares the data decides where the lines go (see ``prepare_data``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data.clean import clean_pairs
from seq2seq.data.lm import TokenBlocks, clean_documents, pack_blocks, split_documents
from seq2seq.data.sources import CorpusSpec, load_corpus, load_texts
from seq2seq.data.split import split_pairs
from seq2seq.data.tokenizer import PairedTokenizer, Tokenizer, tokenizer_from_bytes
from seq2seq.errors import DataError
from seq2seq.textio import write_lines

CACHE_VERSION = 2  # bump when the cached format or the pipeline's output changes
# (2: byte-fallback tokenizer; an English sentence in one split only; no HSK placeholders)
LANGS = ("en", "zh")  # file suffixes of the cached text, source first

log = logging.getLogger(__name__)  # one line per stage of a preparation


@dataclasses.dataclass(frozen=True)
class PrepareSettings:
    """Every data-module argument that can change the cache; each layout reads its own.

    ``max_len_chars``, ``max_ratio`` and ``max_len`` concern translation pairs; ``lm_side``,
    ``text_field`` and ``block_size`` the language model. See ``TranslationDataModule``.
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

    def tokenizer_key(self) -> list[Any]:
        """The settings that change the tokenizer: a given one's bytes (fine-tuning a
        checkpoint), or those of the SentencePiece model trained otherwise."""
        if self.tokenizer is not None:
            return ["given", hashlib.sha256(self.tokenizer).hexdigest()]
        return [self.vocab_size, self.spm_model_type, self.seed]


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

    def lengths(self) -> list[int]:
        """:func:`~seq2seq.data.batching.example_length` of every pair, for the batch sampler."""
        return (np.maximum(self.side_lengths("src"), self.side_lengths("tgt")) + 1).tolist()

    def _side(self, side: str, i: int) -> list[int]:
        start, end = self._offsets[side][i], self._offsets[side][i + 1]
        return self._ids[side][start:end].tolist()

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self._side("src", i), self._side("tgt", i)

    def __len__(self) -> int:
        return len(self._offsets["src"]) - 1


# ----------------------------------------------------------------------------- the cache
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


def fingerprint(path: str) -> list[Any]:
    """Identifies a file's version cheaply (path, size, mtime) so edits invalidate the cache."""
    p = Path(path)
    if not p.exists():
        raise DataError.at(p, None, "file not found")
    stat = p.stat()
    return [str(p.resolve()), stat.st_size, stat.st_mtime_ns]


def is_prepared(cache: Path) -> bool:
    """Whether ``cache`` is complete (``report.json`` is written last)."""
    return (cache / "report.json").is_file()


def build_atomically(cache: Path, build: Callable[[Path], None]) -> None:
    """Runs ``build(directory)`` in a fresh temporary directory, then renames it to ``cache``.

    Another process may finish the same cache first; its copy is kept and ours dropped. The
    temporary name holds the host as well as the process id: on a shared filesystem, nodes
    (containers especially) repeat process ids, and one node's clean-up must never delete
    another's half-built cache.
    """
    tmp = cache.with_name(f"{cache.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        try:
            tmp.rename(cache)
        except OSError:
            if not is_prepared(cache):  # a real error, not a race lost to another process
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_report(cache: Path) -> dict[str, Any]:
    """The cache's ``report.json``."""
    return json.loads((cache / "report.json").read_text(encoding="utf-8"))


def read_split_texts(cache: Path, split: str) -> tuple[list[str], list[str]]:
    """Cleaned (english, chinese) sentences of a translation cache's ``split``, all pairs."""
    en, zh = (_read_cache_lines(cache / f"{split}.{lang}") for lang in LANGS)
    return en, zh


def _read_cache_lines(path: Path) -> list[str]:
    # Not textio.read_lines: it drops a leading U+FEFF, which cleaning keeps (NFKC leaves it),
    # so a first sentence starting with one would no longer match its reference. Not
    # splitlines() either: it would also split at U+2028 and friends inside a sentence.
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _sizes(splits: dict[str, list]) -> str:
    """``train 9,600, dev 120, test 118``."""
    return ", ".join(f"{name} {len(split):,}" for name, split in splits.items())


def _write_report(out: Path, report: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def _train_tokenizer(
    texts: list[str], settings: PrepareSettings, user_symbols: Sequence[str] = ()
) -> tuple[Tokenizer | PairedTokenizer, float]:
    """The joint tokenizer trained on ``texts``, and the seconds it took; the given one
    (``settings.tokenizer``, when fine-tuning a checkpoint) as it is."""
    if settings.tokenizer is not None:
        log.info("tokenizer: the given one (data.tokenizer_from), not trained")
        return tokenizer_from_bytes(settings.tokenizer), 0.0
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


# ----------------------------------------------------------------------------- translation pairs
def prepare_pairs(out: Path, settings: PrepareSettings, user_symbols: Sequence[str] = ()) -> None:
    """Translation pairs: corpus → clean → split → tokenizer → ids, every cache file into ``out``.

    ``user_symbols`` are extra tokenizer pieces (a decoder-only model's ``<sep>``).
    """
    spec = settings.spec
    log.info(f"reading {spec.name}")
    pairs = load_corpus(spec)
    log.info(f"cleaning {len(pairs):,} pairs")
    cleaned, clean_report = clean_pairs(pairs, settings.max_len_chars, settings.max_ratio)
    splits = split_pairs(cleaned)
    log.info(f"split: {_sizes(splits)} pairs")
    if not splits["train"]:
        raise DataError.at(spec.name, None, f"no training pairs left ({clean_report})")
    train_text = [text for pair in splits["train"] for text in pair]
    tokenizer, seconds = _train_tokenizer(train_text, settings, user_symbols)
    report: dict[str, Any] = {
        "corpus": spec.name,
        "clean": clean_report.to_dict(),
        "held_out_english_dropped": len(cleaned) - sum(map(len, splits.values())),
        "split": {name: len(split) for name, split in splits.items()},
        "tokenizer_seconds": seconds,
        "too_long": {},
    }
    tokenizer.save(out / "spm.model")
    for name, split in splits.items():
        log.info(f"tokenizing {name}: {len(split):,} pairs")
        for i, lang in enumerate(LANGS):
            write_lines([pair[i] for pair in split], out / f"{name}.{lang}")
        # Test keeps every pair: every test sentence must be translated.
        ids, dropped = tokenize_pairs(tokenizer, split, settings.max_len, keep_long=name == "test")
        report["too_long"][name] = dropped
        if name == "train" and not len(ids):
            problem = f"every training pair is over max_len={settings.max_len} tokens"
            raise DataError.at(spec.name, None, problem)
        np.savez(out / f"{name}.npz", **ids.arrays())
    _write_report(out, report)


def tokenize_pairs(
    tokenizer: Tokenizer | PairedTokenizer,
    pairs: list[tuple[str, str]],
    max_len: int,
    keep_long: bool,
) -> tuple[TokenizedPairs, int]:
    """Token ids of ``pairs`` and how many pairs were dropped for a side over ``max_len``."""
    src = tokenizer.encode_sources([en for en, _ in pairs])
    tgt = tokenizer.encode_targets([zh for _, zh in pairs])
    keep = [keep_long or max(len(s), len(t)) <= max_len for s, t in zip(src, tgt, strict=True)]
    kept = [i for i, k in enumerate(keep) if k]
    dropped = len(pairs) - len(kept)
    return TokenizedPairs.from_lists([src[i] for i in kept], [tgt[i] for i in kept]), dropped


# ----------------------------------------------------------------------------- language model
def prepare_blocks(out: Path, settings: PrepareSettings) -> None:
    """Language-model text: documents → clean → split → tokenizer → packed blocks, into ``out``."""
    spec = settings.spec
    log.info(f"reading {spec.name}")
    texts = load_texts(spec, settings.lm_side, settings.text_field)
    log.info(f"cleaning {len(texts):,} documents")
    docs, clean_report = clean_documents(texts, settings.lm_side)
    splits = split_documents(docs)
    log.info(f"split: {_sizes(splits)} documents")
    if not splits["train"]:
        raise DataError.at(spec.name, None, f"no training text left ({clean_report})")
    tokenizer, seconds = _train_tokenizer(splits["train"], settings)
    report: dict[str, Any] = {
        "corpus": spec.name,
        "clean": clean_report,
        "split": {name: len(split) for name, split in splits.items()},
        "tokenizer_seconds": seconds,
        "blocks": {},
        "tokens": {},
    }
    tokenizer.save(out / "spm.model")
    for name, split in splits.items():
        log.info(f"tokenizing and packing {name}: {len(split):,} documents")
        write_lines(split, out / f"{name}.txt")
        ids = tokenizer.encode_batch(split)
        blocks = pack_blocks(
            ids, settings.block_size, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
        )
        report["blocks"][name] = len(blocks)
        report["tokens"][name] = TokenBlocks(blocks).n_tokens(tokenizer.pad_id)
        np.savez(out / f"{name}.npz", blocks=blocks)
    _write_report(out, report)
