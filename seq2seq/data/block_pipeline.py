"""The language-model pipeline: documents → clean → split → tokenizer → packed blocks.

:func:`prepare_blocks` writes what :mod:`seq2seq.data.prepare` describes for a language
model's cache (prefix ``lm-``), on Arrow tables like the translation pipeline
(:mod:`seq2seq.data.pair_pipeline`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data import prepare, tables
from seq2seq.data.cache_dir import write_report
from seq2seq.data.lm import TokenBlocks, clean_document_batch, pack_flat
from seq2seq.data.prepare import Encode, PrepareSettings
from seq2seq.data.sources import text_batches
from seq2seq.data.split import SPLITS, bucket_codes, bucket_of_keys, dense_ids, first_occurrences
from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.errors import DataError


def prepare_blocks(out: Path, settings: PrepareSettings) -> None:
    """Language-model text: documents → clean → split → tokenizer → packed blocks, into ``out``.

    On Arrow tables like :func:`~seq2seq.data.pair_pipeline.prepare_pairs`: the documents are
    de-duplicated (first occurrence kept) and split by the hash of each (2% dev, 2% test) on
    key arrays.
    """
    spec, work = settings.spec, out / "tables"
    cleaned = _read_and_clean(settings, work)
    rows, clean_report = _deduplicate_and_split(cleaned, spec.name)
    prepare.log.info(f"split: {prepare.sizes(rows)} documents")
    if not len(rows["train"]):
        raise DataError.at(spec.name, None, f"no training text left ({clean_report})")
    sample = prepare.sample_rows(rows["train"], prepare.TOKENIZER_SENTENCES, settings.seed)
    texts = (
        tables.text_rows(cleaned, ["text"], sample)["text"] if settings.tokenizer is None else []
    )
    tokenizer, seconds = prepare.train_tokenizer(texts, settings)
    report: dict[str, Any] = {
        "corpus": spec.name,
        "clean": clean_report,
        "split": {name: len(split_rows) for name, split_rows in rows.items()},
        "tokenizer_seconds": seconds,
        "blocks": {},
        "tokens": {},
    }
    tokenizer.save(out / "spm.model")
    prepare.write_split_texts(
        cleaned, prepare.split_of_row(rows, len(cleaned)), {"text": "txt"}, out
    )
    for name, split_rows in rows.items():
        blocks, tokens = _pack_split(cleaned, split_rows, name, tokenizer, settings, out)
        report["blocks"][name], report["tokens"][name] = blocks, tokens
    del cleaned
    shutil.rmtree(work)
    write_report(out, report)


def _read_and_clean(settings: PrepareSettings, work: Path) -> Any:
    """The documents read into ``work/raw.arrow``, then cleaned into ``work/clean.arrow``: the
    cleaned table (the raw one is deleted)."""
    spec = settings.spec
    prepare.log.info(f"reading {spec.name}")
    batches = (
        {"text": texts} for texts in text_batches(spec, settings.lm_side, settings.text_field)
    )
    raw = tables.write_table(batches, work / "raw.arrow", _document_features()[0], "reading")
    prepare.log.info(f"cleaning {len(raw):,} documents")
    cleaned = tables.parallel_map(
        raw,
        _clean_documents,
        work / "clean.arrow",
        "cleaning",
        settings.num_proc,
        _document_features()[1],
        {"lang": settings.lm_side},
    )
    del raw
    (work / "raw.arrow").unlink()
    return cleaned


def _deduplicate_and_split(
    cleaned: Any, corpus: str
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The rows of the cleaned table in each split (the first occurrence of each non-empty
    document, split by its hash), and the cleaning counts."""
    empty = tables.column(cleaned, "empty")
    if empty.all():
        raise DataError.at(corpus, None, "corpus is empty (no text)")
    candidates = np.flatnonzero(~empty)
    key_hi = tables.column(cleaned, "key_hi")[candidates]
    key_lo = tables.column(cleaned, "key_lo")[candidates]
    first = first_occurrences(dense_ids(key_hi, key_lo))
    kept, codes = candidates[first], bucket_codes(bucket_of_keys(key_hi[first]))
    rows = {name: kept[codes == code] for code, name in enumerate(SPLITS)}
    clean_report = {
        "total": len(empty),
        "empty": int(empty.sum()),
        "duplicates": len(candidates) - len(kept),
        "kept": len(kept),
    }
    return rows, clean_report


def _pack_split(
    cleaned: Any,
    split_rows: np.ndarray,
    name: str,
    tokenizer: TokenizerLike,
    settings: PrepareSettings,
    out: Path,
) -> tuple[int, int]:
    """Tokenizes split ``name``'s documents and packs them into ``out/<name>/blocks.npy``; the
    number of blocks and of (non-pad) tokens in them."""
    prepare.log.info(f"tokenizing and packing {name}: {len(split_rows):,} documents")
    documents = cleaned.select(split_rows)
    encoded = tables.parallel_map(
        documents,
        _EncodeDocuments(tokenizer.to_bytes()),
        out / "tables" / f"{name}.ids.arrow",
        f"tokenizing {name}",
        settings.num_proc,
        _document_features()[2],
        input_columns=["text"],
    )
    ids = tables.flat_values(encoded, "ids")
    blocks = pack_flat(
        ids,
        tables.list_lengths(encoded, "ids"),
        settings.block_size,
        tokenizer.bos_id,
        tokenizer.eos_id,
        tokenizer.pad_id,
    )
    (out / name).mkdir()
    np.save(out / name / "blocks.npy", blocks)
    return len(blocks), TokenBlocks(blocks).n_tokens(tokenizer.pad_id)


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


class _EncodeDocuments(Encode):
    """Documents' ``text`` to ``ids``."""

    def __call__(self, texts: list[str]) -> dict[str, list[list[int]]]:
        return {"ids": self.tokenizer.encode_batch(texts)}
