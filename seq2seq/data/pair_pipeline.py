"""The translation pipeline: corpus → clean → split → tokenizer → token ids, into a cache.

:func:`prepare_pairs` writes what :mod:`seq2seq.data.prepare` describes for a translation cache,
on Arrow tables (:mod:`seq2seq.data.tables`) so that memory stays flat at any corpus size.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data import tables
from seq2seq.data.alignment import SAMPLE_PAIRS, aligned_term_pairs
from seq2seq.data.cache_dir import LANGS, write_report
from seq2seq.data.catalogs import ui_string_pairs
from seq2seq.data.clean import FILTER_REASONS, CleanReport, clean_batch
from seq2seq.data.dictionary import dictionary_pairs
from seq2seq.data.distilled import distilled_pairs, without_distilled
from seq2seq.data.modifiers import Modifiers
from seq2seq.data.prepare import (
    TOKENIZER_SENTENCES,
    Encode,
    PrepareSettings,
    log,
    sample_rows,
    sizes,
    split_of_row,
    train_tokenizer,
    write_split_texts,
)
from seq2seq.data.sources import CorpusSpec, pair_batches
from seq2seq.data.split import (
    DROPPED,
    SPLITS,
    bucket_of_keys,
    dense_ids,
    first_occurrences,
    split_codes,
)
from seq2seq.data.terms import TERM_TAGS, annotated_source_ids, read_termbase
from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.errors import DataError
from seq2seq.textio import read_lines

KEY_COLUMNS = ("en_key_hi", "en_key_lo", "zh_key_hi", "zh_key_lo")
SIDES = ("src", "tgt")  # the tokenized table's columns, source first
PairLengths = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (src, tgt lengths) -> costs


def _features() -> tuple[Any, Any, Any]:
    """The column types of the raw, cleaned and tokenized tables."""
    import datasets  # deferred: importing datasets costs ~1 s; only preparing needs it

    text = {"en": datasets.Value("string"), "zh": datasets.Value("string")}
    keys = {name: datasets.Value("uint64") for name in KEY_COLUMNS}
    cleaned = {**text, "drop": datasets.Value("uint8"), **keys}
    ids = {side: datasets.List(datasets.Value("int32")) for side in SIDES}
    return datasets.Features(text), datasets.Features(cleaned), datasets.Features(ids)


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
    cleaned = _read_and_clean(settings, work)
    rows, clean_report, held_out = _deduplicate_and_split(cleaned)
    log.info(f"split: {sizes(rows)} pairs")
    if not len(rows["train"]):
        raise DataError.at(spec.name, None, f"no training pairs left ({clean_report})")
    if settings.modifiers.terms:
        user_symbols = (*user_symbols, *TERM_TAGS)  # control symbols: placed by id only
    tokenizer, seconds = _pair_tokenizer(cleaned, rows["train"], settings, user_symbols)
    if settings.tokenizer is None:
        tokenizer.source_ends_with_eos = source_ends_with_eos
    report = _first_report(spec.name, clean_report, held_out, rows, seconds, tokenizer)
    tokenizer.save(out / "spm.model")
    row_split = split_of_row(rows, len(cleaned))
    write_split_texts(cleaned, row_split, {lang: lang for lang in LANGS}, out)
    if settings.modifiers.aligned_terms:
        settings, report["aligned_terms"] = _with_aligned_terms(
            cleaned, rows["train"], settings, out
        )
    encoded = _encode(cleaned, tokenizer, settings, work, row_split == SPLITS.index("train"))
    if settings.modifiers.distilled:  # the teacher's translations train in their place
        row_split = without_distilled(cleaned, rows["train"], row_split, settings.modifiers)
    for name, pairs in _added_pairs(settings.modifiers, settings.seed):
        before = len(row_split)
        encoded, row_split = _add_pairs(
            name, pairs, encoded, row_split, tokenizer, settings, work, out
        )
        report[f"{name}_pairs"] = int(len(row_split) - before)
    report["too_long"] = _save_splits(
        encoded, row_split, out, settings.max_len, tokenizer, pair_lengths
    )
    if report["too_long"]["train"] == len(rows["train"]):
        problem = f"every training pair is over max_len={settings.max_len} tokens"
        raise DataError.at(spec.name, None, problem)
    del cleaned, encoded
    shutil.rmtree(work)
    write_report(out, report)


def _first_report(
    name: str, clean_report: Any, held_out: int, rows: dict, seconds: float, tokenizer: Any
) -> dict[str, Any]:
    """report.json's figures known once the tokenizer is trained (the rest come later)."""
    return {
        "corpus": name,
        "clean": clean_report.to_dict(),
        "held_out_english_dropped": held_out,
        "split": {split: len(split_rows) for split, split_rows in rows.items()},
        "tokenizer_seconds": seconds,
        "source_ends_with_eos": bool(tokenizer.source_ends_with_eos),
        "too_long": {},
    }


def _read_and_clean(settings: PrepareSettings, work: Path) -> Any:
    """The corpus read into ``work/raw.arrow``, then cleaned into ``work/clean.arrow``: the
    cleaned table (the raw one is deleted: the normalised text is all that is read after)."""
    spec = settings.spec
    log.info(f"reading {spec.name}")
    raw = tables.write_table(_column_batches(spec), work / "raw.arrow", _features()[0], "reading")
    if not len(raw):
        raise DataError.at(spec.name, None, "corpus is empty (no sentence pairs)")
    log.info(f"cleaning {len(raw):,} pairs")
    limits = {"max_len_chars": settings.max_len_chars, "max_ratio": settings.max_ratio}
    cleaned = tables.parallel_map(
        raw,
        _clean_columns,
        work / "clean.arrow",
        "cleaning",
        settings.num_proc,
        _features()[1],
        limits,
    )
    del raw
    (work / "raw.arrow").unlink()
    return cleaned


def _encode(
    cleaned: Any,
    tokenizer: TokenizerLike,
    settings: PrepareSettings,
    work: Path,
    training: np.ndarray,
    name: str = "ids",
    first_row: int = 0,
) -> Any:
    """Every cleaned pair as ``src``/``tgt`` token ids, a table in ``work/<name>.arrow``; the
    pairs of ``training`` rows ((N,) bool) with the modifiers drawn for their row (counted from
    ``first_row``) applied first."""
    log.info(f"tokenizing {len(cleaned):,} pairs")
    encode = _EncodePairs(
        tokenizer.to_bytes(),
        tokenizer.source_ends_with_eos,
        settings.modifiers if settings.modifiers.active else None,
        settings.seed,
    )
    return tables.parallel_map(
        cleaned,
        encode,
        work / f"{name}.arrow",
        "tokenizing",
        settings.num_proc,
        _features()[2],
        input_columns=list(LANGS),
        fn_kwargs={"training": training, "first_row": first_row},
        with_indices=True,
    )


def _added_pairs(
    modifiers: Modifiers, seed: int
) -> Iterator[tuple[str, Callable[[], list[tuple[str, str]]]]]:
    """The pairs the modifiers add, by name: a distilled corpus (in the training split's
    place), CC-CEDICT's words, then the catalogs' UI strings (each a function giving its
    pairs, read only when asked for)."""
    if modifiers.distilled:
        yield "distilled", lambda: distilled_pairs(modifiers.distilled)
    if modifiers.dictionary:
        yield "dictionary", lambda: dictionary_pairs(modifiers.dictionary, seed)
    if modifiers.ui_strings:
        yield "ui_string", lambda: ui_string_pairs(modifiers.ui_strings, modifiers.catalogs)


def _add_pairs(
    name: str,
    read: Callable[[], list[tuple[str, str]]],
    encoded: Any,
    row_split: np.ndarray,
    tokenizer: TokenizerLike,
    settings: PrepareSettings,
    work: Path,
    out: Path,
) -> tuple[Any, np.ndarray]:
    """The tokenized table with ``read()``'s pairs after the corpus's, all in the training
    split (their rows continue the corpus's, so the modifiers draw for them as well). A pair
    whose English is a held-out sentence's is left out: a test sentence is never trained on."""
    import datasets

    held_out = {
        line.casefold() for split in ("dev", "test") for line in read_lines(out / f"{split}.en")
    }
    pairs = [pair for pair in read() if pair[0].casefold() not in held_out]
    log.info(f"adding {len(pairs):,} {name} pairs to the training split")
    table = datasets.Dataset.from_dict(
        {"en": [en for en, _ in pairs], "zh": [zh for _, zh in pairs]}, _features()[0]
    )
    training = np.ones(len(pairs), dtype=bool)
    extra = _encode(table, tokenizer, settings, work, training, name, len(row_split))
    train = np.full(len(pairs), SPLITS.index("train"), dtype=row_split.dtype)
    return datasets.concatenate_datasets([encoded, extra]), np.concatenate([row_split, train])


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


def _with_aligned_terms(
    cleaned: Any, train_rows: np.ndarray, settings: PrepareSettings, out: Path
) -> tuple[PrepareSettings, int]:
    """``settings`` whose ``terms`` modifier reads ``out/terms.tsv``: the user's termbase (if
    any), then up to ``aligned_terms`` pairs learnt from the training split by word association
    (:func:`seq2seq.data.alignment.aligned_term_pairs`, on a sample of at most
    :data:`~seq2seq.data.alignment.SAMPLE_PAIRS` of them); and how many were learnt."""
    modifiers = settings.modifiers
    log.info(f"learning up to {modifiers.aligned_terms:,} term pairs from the training split")
    sample = sample_rows(train_rows, SAMPLE_PAIRS, settings.seed)
    texts = tables.text_rows(cleaned, ["en", "zh"], sample)
    pairs = list(zip(texts["en"], texts["zh"], strict=True))
    learnt = aligned_term_pairs(pairs, modifiers.aligned_terms)
    own = read_termbase(modifiers.termbase) if modifiers.termbase else []
    path = out / "terms.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in [*own, *learnt]), encoding="utf-8")
    return dataclasses.replace(
        settings, modifiers=dataclasses.replace(modifiers, termbase=str(path))
    ), len(learnt)


def _pair_tokenizer(
    cleaned: Any, train_rows: np.ndarray, settings: PrepareSettings, user_symbols: Sequence[str]
) -> tuple[TokenizerLike, float]:
    """The tokenizer, trained on both sides of (a sample of) the training pairs.

    SentencePiece learns from at most :data:`TOKENIZER_SENTENCES` sentences: a corpus with
    more training pairs gives it a random sample (by ``settings.seed``), drawn here from the
    table, so the other pairs are never read into memory. Below that, every training sentence,
    English then Chinese of each pair in corpus order.
    """
    if settings.tokenizer is not None:
        return train_tokenizer([], settings, user_symbols)
    sample = sample_rows(train_rows, TOKENIZER_SENTENCES // 2, settings.seed)
    pairs = tables.text_rows(cleaned, ["en", "zh"], sample)
    texts = [text for pair in zip(pairs["en"], pairs["zh"], strict=True) for text in pair]
    return train_tokenizer(texts, settings, user_symbols)


class _EncodePairs(Encode):
    """``en``/``zh`` text to ``src``/``tgt`` ids, training rows through the modifiers."""

    def __init__(
        self,
        tokenizer_bytes: bytes,
        source_ends_with_eos: bool,
        modifiers: Modifiers | None = None,
        seed: int = 1,
    ) -> None:
        super().__init__(tokenizer_bytes, source_ends_with_eos)
        self.modifiers, self.seed = modifiers, seed

    def __call__(
        self,
        sources: list[str],
        targets: list[str],
        indices: list[int],
        training: np.ndarray,
        first_row: int = 0,
    ) -> dict[str, list[list[int]]]:
        annotated: dict[int, list[int]] = {}  # batch position -> its term-annotated source ids
        if self.modifiers is not None:
            rows = np.asarray(indices, dtype=np.int64)
            chosen = np.flatnonzero(training[rows])
            sources, targets = list(sources), list(targets)
            modified = self.modifiers.apply(
                [sources[i] for i in chosen],
                [targets[i] for i in chosen],
                rows[chosen] + first_row,
                self.seed,
            )
            for i, en, zh, spans in zip(chosen, *modified, strict=True):
                sources[i], targets[i] = en, zh
                if spans:
                    annotated[i] = annotated_source_ids(self.tokenizer, en, spans)
        src = self.tokenizer.encode_sources(sources)
        for i, ids in annotated.items():
            src[i] = ids
        return {"src": src, "tgt": self.tokenizer.encode_targets(targets)}


def _save_splits(
    encoded: Any,
    row_split: np.ndarray,
    out: Path,
    max_len: int,
    tokenizer: TokenizerLike,
    pair_lengths: PairLengths,
) -> dict[str, int]:
    """Writes each split's :class:`~seq2seq.data.tokenized_pairs.TokenizedPairs` files into
    ``out/<split>/``, in two streamed passes over the tokenized table; returns how many pairs of
    each split were dropped for a side over ``max_len`` tokens (none of test: every test
    sentence must be translated)."""
    side_lengths = {side: tables.list_lengths(encoded, side).astype(np.int32) for side in SIDES}
    longer = np.maximum(side_lengths["src"], side_lengths["tgt"])
    ids_dtype = tables.smallest_int_dtype(tokenizer.vocab_size - 1)
    keep, too_long, writers = {}, {}, {}
    for code, name in enumerate(SPLITS):
        in_split = row_split == code
        keep[name] = in_split if name == "test" else in_split & (longer <= max_len)
        too_long[name] = int(in_split.sum() - keep[name].sum())
        directory = out / name
        directory.mkdir()
        for side, lengths in side_lengths.items():
            writers[name, side] = _start_side(directory, side, lengths[keep[name]], ids_dtype)
        kept_lengths = (side_lengths["src"][keep[name]], side_lengths["tgt"][keep[name]])
        _save_costs_and_order(directory, pair_lengths(*kept_lengths))
    _stream_ids(encoded, keep, side_lengths, writers)
    return too_long


def _start_side(
    directory: Path, side: str, lengths: np.ndarray, ids_dtype: np.dtype
) -> tables.NpyWriter:
    """Saves one side's ``<side>_offsets.npy`` from its sentence ``lengths``; the writer of its
    ``<side>.npy``, sized for them, which the second pass fills."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(directory / f"{side}_offsets.npy", offsets)
    return tables.NpyWriter(directory / f"{side}.npy", ids_dtype, int(offsets[-1]))


def _save_costs_and_order(directory: Path, costs: np.ndarray) -> None:
    """Each pair's batching cost (``lengths.npy``) and their stable sorting order
    (``order.npy``), each in the smallest integer type that holds it."""
    np.save(
        directory / "lengths.npy", costs.astype(tables.smallest_int_dtype(costs.max(initial=0)))
    )
    order = np.argsort(costs, kind="stable")
    np.save(directory / "order.npy", order.astype(tables.index_dtype(len(order))))


def _stream_ids(
    encoded: Any,
    keep: dict[str, np.ndarray],
    side_lengths: dict[str, np.ndarray],
    writers: dict[tuple[str, str], tables.NpyWriter],
) -> None:
    """The second pass: each kept pair's ids appended to its split's ``<side>.npy``."""
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
