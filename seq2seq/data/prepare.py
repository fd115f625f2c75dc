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
packed blocks, (n_blocks, block_size + 1) int32 (:func:`seq2seq.data.lm.pack_blocks`),
``{split}.txt`` (the cleaned documents) and ``report.json``.

Translation pairs are prepared on Arrow tables with ``datasets`` (:mod:`seq2seq.data.tables`):
memory stays flat at any corpus size, and cleaning and tokenizing run in ``num_proc``
processes. Every array is a plain ``.npy`` file that readers map (``mmap_mode="r"``), so the
ranks of one machine share one copy of the ids in the page cache.

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data import tables
from seq2seq.data.clean import FILTER_REASONS, CleanReport, clean_batch
from seq2seq.data.lm import TokenBlocks, clean_document_batch, pack_flat
from seq2seq.data.sources import CorpusSpec, pair_batches, text_batches
from seq2seq.data.split import (
    DROPPED,
    SPLITS,
    bucket_codes,
    bucket_of_keys,
    dense_ids,
    first_occurrences,
    split_codes,
)
from seq2seq.data.tokenizer import PairedTokenizer, Tokenizer, tokenizer_from_bytes
from seq2seq.errors import DataError

CACHE_VERSION = 3  # bump when the cached format or the pipeline's output changes
# (2: byte-fallback tokenizer; an English sentence in one split only; no HSK placeholders;
# 3: sources end with </s>; memory-mapped .npy arrays per split)
LANGS = ("en", "zh")  # file suffixes of the cached text, source first
TOKENIZER_SENTENCES = 200_000  # SentencePiece trains on at most this many sentences
KEY_COLUMNS = ("en_key_hi", "en_key_lo", "zh_key_hi", "zh_key_lo")
SIDES = ("src", "tgt")  # the tokenized table's columns, source first
PairLengths = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (src, tgt lengths) -> costs

log = logging.getLogger(__name__)  # one line per stage of a preparation


def _features() -> tuple[Any, Any, Any]:
    """The column types of the raw, cleaned and tokenized tables."""
    import datasets  # deferred: importing datasets costs ~1 s; only preparing needs it

    text = {"en": datasets.Value("string"), "zh": datasets.Value("string")}
    keys = {name: datasets.Value("uint64") for name in KEY_COLUMNS}
    cleaned = {**text, "drop": datasets.Value("uint8"), **keys}
    ids = {side: datasets.List(datasets.Value("int32")) for side in SIDES}
    return datasets.Features(text), datasets.Features(cleaned), datasets.Features(ids)


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

    def tokenizer_key(self) -> list[Any]:
        """The settings that change the tokenizer: a given one's bytes (fine-tuning a
        checkpoint), or those of the SentencePiece model trained otherwise."""
        if self.tokenizer is not None:
            digest = hashlib.sha256(self.tokenizer).hexdigest()
            return ["given", digest] + ([] if self.tokenizer_source_eos else ["no source eos"])
        return [self.vocab_size, self.spm_model_type, self.seed]


class TokenizedPairs:
    """Token-id pairs stored as flat arrays; ``self[i]`` is ``(src_ids, tgt_ids)``.

    The arrays (``src``/``tgt`` ids, their ``*_offsets``, optionally each pair's batching cost
    ``lengths`` and their stable ``order``) are usually read-only memory maps of a cache
    directory (:meth:`load`): every process of a machine reads the same pages, and forked
    ``DataLoader`` workers share them too.
    """

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self._ids = {side: arrays[side] for side in ("src", "tgt")}
        self._offsets = {side: arrays[f"{side}_offsets"] for side in ("src", "tgt")}
        self.stored_lengths = arrays.get("lengths")
        self.stored_order = arrays.get("order")

    @classmethod
    def load(cls, directory: Path) -> TokenizedPairs:
        """Maps a split's arrays (written by :func:`prepare_pairs`) without reading them."""
        names = ("src", "tgt", "src_offsets", "tgt_offsets", "lengths", "order")
        return cls({name: np.load(directory / f"{name}.npy", mmap_mode="r") for name in names})

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> TokenizedPairs:
        """Packs per-sentence id lists (in memory; for tests and small data)."""
        arrays = {}
        for side, seqs in (("src", src), ("tgt", tgt)):
            lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(lengths)])
            flat = [token for seq in seqs for token in seq]
            arrays[side] = np.asarray(flat, dtype=np.int32)
        return cls(arrays)

    def side_lengths(self, side: str) -> np.ndarray:
        """Token count of every sentence of ``side`` (``"src"`` or ``"tgt"``)."""
        return np.diff(self._offsets[side])

    def lengths(self) -> np.ndarray:
        """:func:`~seq2seq.data.batching.example_length` of every pair, for the batch sampler."""
        return np.maximum(self.side_lengths("src"), self.side_lengths("tgt")) + 1

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
    another's half-built cache. What a killed preparation of this host left behind (its process
    is gone) is removed first.
    """
    host = socket.gethostname()
    _remove_abandoned_builds(cache, host)
    tmp = cache.with_name(f"{cache.name}.tmp-{host}-{os.getpid()}")
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


def _remove_abandoned_builds(cache: Path, host: str) -> None:
    """Deletes ``<cache>.tmp-<host>-<pid>`` directories whose process no longer runs."""
    prefix = f"{cache.name}.tmp-{host}-"
    for tmp in cache.parent.glob(f"{prefix}*") if cache.parent.is_dir() else ():
        pid = tmp.name.removeprefix(prefix)
        if pid.isdigit() and not _process_runs(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user
        return True
    return True


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


# ----------------------------------------------------------------------------- translation pairs
def prepare_pairs(
    out: Path,
    settings: PrepareSettings,
    pair_lengths: PairLengths,
    user_symbols: Sequence[str] = (),
    source_ends_with_eos: bool = True,
) -> None:
    """Translation pairs: corpus → clean → split → tokenizer → ids, every cache file into ``out``.

    Runs on Arrow tables in ``out/tables`` (:mod:`seq2seq.data.tables`; removed at the end), so
    memory stays flat whatever the corpus size: the text is only ever in memory-mapped files
    and worker processes, the preparing process holds arrays of a few bytes per pair.

    Args:
        pair_lengths: each pair's cost for the batch sampler from its side lengths (the layout's).
        user_symbols: extra tokenizer pieces (a decoder-only model's ``<sep>``).
        source_ends_with_eos: whether a trained tokenizer ends sources with ``</s>`` (encoder-
            decoder models, as Marian); a given tokenizer keeps its own convention.
    """
    spec, work = settings.spec, out / "tables"
    log.info(f"reading {spec.name}")
    raw = tables.write_table(_column_batches(spec), work / "raw.arrow", _features()[0], "reading")
    if not len(raw):
        raise DataError.at(spec.name, None, "corpus is empty (no sentence pairs)")
    log.info(f"cleaning {len(raw):,} pairs")
    limits = {"max_len_chars": settings.max_len_chars, "max_ratio": settings.max_ratio}
    cleaned = tables.parallel_map(raw, _clean_columns, work / "clean.arrow", "cleaning",
                                  settings.num_proc, _features()[1], limits)  # fmt: skip
    del raw
    (work / "raw.arrow").unlink()  # the normalised text is all that is read from here on
    rows, clean_report, held_out = _deduplicate_and_split(cleaned)
    log.info(f"split: {_sizes(rows)} pairs")
    if not len(rows["train"]):
        raise DataError.at(spec.name, None, f"no training pairs left ({clean_report})")
    tokenizer, seconds = _pair_tokenizer(cleaned, rows["train"], settings, user_symbols)
    if settings.tokenizer is None:
        tokenizer.source_ends_with_eos = source_ends_with_eos
    report: dict[str, Any] = {
        "corpus": spec.name,
        "clean": clean_report.to_dict(),
        "held_out_english_dropped": held_out,
        "split": {name: len(split_rows) for name, split_rows in rows.items()},
        "tokenizer_seconds": seconds,
        "source_ends_with_eos": bool(tokenizer.source_ends_with_eos),
        "too_long": {},
    }
    tokenizer.save(out / "spm.model")
    split_of_row = _split_of_row(rows, len(cleaned))
    _write_split_texts(cleaned, split_of_row, {lang: lang for lang in LANGS}, out)
    log.info(f"tokenizing {len(cleaned):,} pairs")
    encode = _EncodePairs(tokenizer.to_bytes(), tokenizer.source_ends_with_eos)
    encoded = tables.parallel_map(cleaned, encode, work / "ids.arrow", "tokenizing",
                                  settings.num_proc, _features()[2],
                                  input_columns=list(LANGS))  # fmt: skip
    report["too_long"] = _save_splits(encoded, split_of_row, out, settings.max_len, tokenizer,
                                      pair_lengths)  # fmt: skip
    if report["too_long"]["train"] == len(rows["train"]):
        problem = f"every training pair is over max_len={settings.max_len} tokens"
        raise DataError.at(spec.name, None, problem)
    del cleaned, encoded
    shutil.rmtree(work)
    _write_report(out, report)


def _column_batches(spec: CorpusSpec) -> Iterator[dict[str, list[str]]]:
    for sources, targets in pair_batches(spec):
        yield {"en": sources, "zh": targets}


def _clean_columns(batch: dict[str, list], max_len_chars: int, max_ratio: float) -> dict[str, list]:
    return clean_batch(batch["en"], batch["zh"], max_len_chars, max_ratio)


def _deduplicate_and_split(cleaned: Any) -> tuple[dict[str, np.ndarray], CleanReport, int]:
    """The rows of the cleaned table in each split (ascending: corpus order), the cleaning
    counts, and how many training pairs were dropped for held-out English.

    Works on the key arrays alone (:func:`seq2seq.data.clean.clean_batch`): de-duplication
    keeps each distinct (english, chinese) pair's first row, then :func:`split_codes` splits.
    Each array is dropped as soon as it is used: this is the preparation's largest moment.
    """
    drop = tables.column(cleaned, "drop")
    counts = np.bincount(drop, minlength=len(FILTER_REASONS))
    candidates = np.flatnonzero(drop == 0).astype(tables.index_dtype(len(drop)))
    del drop
    en_ids = _sentence_ids(cleaned, "en", candidates)
    zh_buckets = bucket_of_keys(tables.column(cleaned, "zh_key_hi")[candidates]).astype(np.uint16)
    zh_ids = _sentence_ids(cleaned, "zh", candidates)
    pair_ids = en_ids.astype(np.int64) * (int(zh_ids.max(initial=0)) + 1) + zh_ids
    first = first_occurrences(pair_ids)
    del pair_ids
    codes = split_codes(en_ids[first], zh_ids[first], zh_buckets[first])
    kept = candidates[first]
    report = CleanReport(
        total=int(counts.sum()),
        kept=len(kept),
        duplicate=len(candidates) - len(kept),
        **{reason: int(counts[i]) for i, reason in enumerate(FILTER_REASONS) if reason},
    )
    rows = {name: kept[codes == code] for code, name in enumerate(SPLITS)}
    return rows, report, int((codes == DROPPED).sum())


def _sentence_ids(cleaned: Any, side: str, rows: np.ndarray) -> np.ndarray:
    """:func:`dense_ids` of one side's sentences in ``rows``, as the smallest integers that fit."""
    key_hi = tables.column(cleaned, f"{side}_key_hi")[rows]
    key_lo = tables.column(cleaned, f"{side}_key_lo")[rows]
    return dense_ids(key_hi, key_lo).astype(tables.index_dtype(len(rows)))


def _pair_tokenizer(
    cleaned: Any, train_rows: np.ndarray, settings: PrepareSettings, user_symbols: Sequence[str]
) -> tuple[Tokenizer | PairedTokenizer, float]:
    """The tokenizer, trained on both sides of (a sample of) the training pairs.

    SentencePiece learns from at most :data:`TOKENIZER_SENTENCES` sentences: a corpus with
    more training pairs gives it a random sample (by ``settings.seed``), drawn here from the
    table, so the other pairs are never read into memory. Below that, every training sentence,
    English then Chinese of each pair in corpus order.
    """
    if settings.tokenizer is not None:
        return _train_tokenizer([], settings, user_symbols)
    sample = _sample(train_rows, TOKENIZER_SENTENCES // 2, settings.seed)
    pairs = tables.text_rows(cleaned, ["en", "zh"], sample)
    texts = [text for pair in zip(pairs["en"], pairs["zh"], strict=True) for text in pair]
    return _train_tokenizer(texts, settings, user_symbols)


def _split_of_row(rows: dict[str, np.ndarray], n_rows: int) -> np.ndarray:
    """(n_rows,) int8: each row's index in :data:`SPLITS`, -1 for rows in none."""
    split_of_row = np.full(n_rows, -1, dtype=np.int8)
    for code, name in enumerate(SPLITS):
        split_of_row[rows[name]] = code
    return split_of_row


def _write_split_texts(
    table: Any, split_of_row: np.ndarray, suffixes: dict[str, str], out: Path
) -> None:
    """Each split's rows of the text ``columns``, one per line, into ``out/<split>.<suffix>``
    (lines as :func:`seq2seq.textio.write_lines` writes them), in one streamed pass."""
    paths = {(name, column): out / f"{name}.{suffix}"
             for name in SPLITS for column, suffix in suffixes.items()}  # fmt: skip
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


class _Encode:
    """A batched map to token ids; picklable, so ``datasets`` can hand it to worker processes,
    each building the tokenizer (from its bytes) once."""

    def __init__(self, tokenizer_bytes: bytes, source_ends_with_eos: bool = False) -> None:
        self.tokenizer_bytes, self.source_ends_with_eos = tokenizer_bytes, source_ends_with_eos
        self._tokenizer: Tokenizer | PairedTokenizer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}

    @property
    def tokenizer(self) -> Tokenizer | PairedTokenizer:
        if self._tokenizer is None:
            self._tokenizer = tokenizer_from_bytes(self.tokenizer_bytes, self.source_ends_with_eos)
        return self._tokenizer


class _EncodePairs(_Encode):
    """``en``/``zh`` text to ``src``/``tgt`` ids."""

    def __call__(self, sources: list[str], targets: list[str]) -> dict[str, list[list[int]]]:
        return {
            "src": self.tokenizer.encode_sources(sources),
            "tgt": self.tokenizer.encode_targets(targets),
        }


class _EncodeDocuments(_Encode):
    """Documents' ``text`` to ``ids``."""

    def __call__(self, texts: list[str]) -> dict[str, list[list[int]]]:
        return {"ids": self.tokenizer.encode_batch(texts)}


def _save_splits(
    encoded: Any,
    split_of_row: np.ndarray,
    out: Path,
    max_len: int,
    tokenizer: Tokenizer | PairedTokenizer,
    pair_lengths: PairLengths,
) -> dict[str, int]:
    """Writes each split's :class:`TokenizedPairs` files into ``out/<split>/``, in two streamed
    passes over the tokenized table; returns how many pairs of each split were dropped for a
    side over ``max_len`` tokens (none of test: every test sentence must be translated)."""
    side_lengths = {side: tables.list_lengths(encoded, side).astype(np.int32) for side in SIDES}
    longer = np.maximum(side_lengths["src"], side_lengths["tgt"])
    ids_dtype = tables.smallest_int_dtype(tokenizer.vocab_size - 1)
    keep, too_long, writers = {}, {}, {}
    for code, name in enumerate(SPLITS):
        in_split = split_of_row == code
        keep[name] = in_split if name == "test" else in_split & (longer <= max_len)
        too_long[name] = int(in_split.sum() - keep[name].sum())
        directory = out / name
        directory.mkdir()
        for side, lengths in side_lengths.items():
            offsets = np.zeros(int(keep[name].sum()) + 1, dtype=np.int64)
            np.cumsum(lengths[keep[name]], out=offsets[1:])
            np.save(directory / f"{side}_offsets.npy", offsets)
            writers[name, side] = tables.NpyWriter(
                directory / f"{side}.npy", ids_dtype, int(offsets[-1])
            )
        costs = pair_lengths(side_lengths["src"][keep[name]], side_lengths["tgt"][keep[name]])
        np.save(
            directory / "lengths.npy", costs.astype(tables.smallest_int_dtype(costs.max(initial=0)))
        )
        order = np.argsort(costs, kind="stable")
        np.save(directory / "order.npy", order.astype(tables.index_dtype(len(order))))
    start = 0
    for batch in tables.record_batches(encoded, list(SIDES)):
        rows = slice(start, start + batch.num_rows)
        for side in SIDES:
            values = batch.column(side).flatten().to_numpy(zero_copy_only=False)
            for name in SPLITS:
                writers[name, side].write(
                    values[np.repeat(keep[name][rows], side_lengths[side][rows])]
                )
        start += batch.num_rows
    for writer in writers.values():
        writer.close()
    return too_long


# ----------------------------------------------------------------------------- language model
def prepare_blocks(out: Path, settings: PrepareSettings) -> None:
    """Language-model text: documents → clean → split → tokenizer → packed blocks, into ``out``.

    On Arrow tables like :func:`prepare_pairs`: the documents are de-duplicated (first
    occurrence kept) and split by the hash of each (2% dev, 2% test) on key arrays.
    """
    spec, work = settings.spec, out / "tables"
    log.info(f"reading {spec.name}")
    batches = (
        {"text": texts} for texts in text_batches(spec, settings.lm_side, settings.text_field)
    )
    raw = tables.write_table(batches, work / "raw.arrow", _document_features()[0], "reading")
    log.info(f"cleaning {len(raw):,} documents")
    cleaned = tables.parallel_map(raw, _clean_documents, work / "clean.arrow", "cleaning",
                                  settings.num_proc, _document_features()[1],
                                  {"lang": settings.lm_side})  # fmt: skip
    del raw
    (work / "raw.arrow").unlink()
    empty = tables.column(cleaned, "empty")
    if empty.all():
        raise DataError.at(spec.name, None, "corpus is empty (no text)")
    candidates = np.flatnonzero(~empty)
    key_hi = tables.column(cleaned, "key_hi")[candidates]
    key_lo = tables.column(cleaned, "key_lo")[candidates]
    first = first_occurrences(dense_ids(key_hi, key_lo))
    kept, codes = candidates[first], bucket_codes(bucket_of_keys(key_hi[first]))
    rows = {name: kept[codes == code] for code, name in enumerate(SPLITS)}
    clean_report = {"total": len(empty), "empty": int(empty.sum()),
                    "duplicates": len(candidates) - len(kept), "kept": len(kept)}  # fmt: skip
    log.info(f"split: {_sizes(rows)} documents")
    if not len(rows["train"]):
        raise DataError.at(spec.name, None, f"no training text left ({clean_report})")
    sample = _sample(rows["train"], TOKENIZER_SENTENCES, settings.seed)
    texts = (
        tables.text_rows(cleaned, ["text"], sample)["text"] if settings.tokenizer is None else []
    )
    tokenizer, seconds = _train_tokenizer(texts, settings)
    report: dict[str, Any] = {
        "corpus": spec.name,
        "clean": clean_report,
        "split": {name: len(split_rows) for name, split_rows in rows.items()},
        "tokenizer_seconds": seconds,
        "blocks": {},
        "tokens": {},
    }
    tokenizer.save(out / "spm.model")
    _write_split_texts(cleaned, _split_of_row(rows, len(cleaned)), {"text": "txt"}, out)
    for name, split_rows in rows.items():
        log.info(f"tokenizing and packing {name}: {len(split_rows):,} documents")
        documents = cleaned.select(split_rows)
        encoded = tables.parallel_map(documents, _EncodeDocuments(tokenizer.to_bytes()),
                                      work / f"{name}.ids.arrow", f"tokenizing {name}",
                                      settings.num_proc, _document_features()[2],
                                      input_columns=["text"])  # fmt: skip
        ids = tables.flat_values(encoded, "ids")
        blocks = pack_flat(ids, tables.list_lengths(encoded, "ids"), settings.block_size,
                           tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id)  # fmt: skip
        report["blocks"][name] = len(blocks)
        report["tokens"][name] = TokenBlocks(blocks).n_tokens(tokenizer.pad_id)
        (out / name).mkdir()
        np.save(out / name / "blocks.npy", blocks)
    del cleaned, documents, encoded
    shutil.rmtree(work)
    _write_report(out, report)


def _document_features() -> tuple[Any, Any, Any]:
    """The column types of the raw, cleaned and tokenized document tables."""
    import datasets

    text = {"text": datasets.Value("string")}
    keys = {"key_hi": datasets.Value("uint64"), "key_lo": datasets.Value("uint64")}
    cleaned = {**text, "empty": datasets.Value("bool"), **keys}
    ids = {"ids": datasets.List(datasets.Value("int32"))}
    return datasets.Features(text), datasets.Features(cleaned), datasets.Features(ids)


def _clean_documents(batch: dict[str, list], lang: str) -> dict[str, Any]:
    return clean_document_batch(batch["text"], lang)


def _sample(rows: np.ndarray, most: int, seed: int) -> np.ndarray:
    """``rows`` if there are at most ``most``, else a sorted random sample of ``most`` of them."""
    if len(rows) <= most:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, most, replace=False))
