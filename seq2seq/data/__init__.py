"""Data, floor 3: from corpora to batches of token ids.

    sources.py           loaders: the bundled corpus, local files, Hugging Face datasets
    clean.py             normalisation and pair filtering
    modifiers.py         training-time modifiers: upper/title case, no end stop, dictionary
    dictionary.py        short segments: CC-CEDICT glosses of common words, as training pairs
    distilled.py         a distilled corpus in the training pairs' place (knowledge distillation)
    catalogs.py          short segments: UI strings from gettext catalogs (.po), Django's too
    copying.py           made-up spans (URLs, versions, identifiers...) on both sides: copying
    terms.py             inline term annotation (<term> src <trans> zh </term>), by tag ids
    alignment.py         term pairs learnt from a corpus by word association (Dice)
    shortlist.py         a lexical shortlist learnt from token-id pairs (IBM Model 1)
    truecase.py          SHOUTED and Title Cased input read in sentence case, at inference
    split.py             the fixed train/dev/test split, keyed on a hash of the Chinese side
    tokenizer.py         the joint English+Chinese SentencePiece model, fixed special ids
    paired_tokenizer.py  an imported Marian model's two SentencePiece models, one vocabulary
    prepare.py           corpus -> clean -> split -> tokenizer -> token ids, cached once: the
                         settings, the cache's name, the stages both pipelines share
    pair_pipeline.py     the translation pipeline: pairs -> token ids, split by split
    block_pipeline.py    the language-model pipeline: documents -> packed blocks
    cache_dir.py         the preparation's cache directory: built atomically, read back
    tokenized_pairs.py   a split's token-id pairs in flat (memory-mapped) arrays
    tables.py            Arrow tables: a corpus on disk, memory-mapped, several processes
    lm.py                monolingual text for a decoder-only model: packed blocks
    layouts.py           pairs, joined pairs or LM blocks, chosen once
    batching.py          batches: the padded Batch, collation, each example's length
    sampler.py           token-budget batching: the length-bucketing, resumable batch sampler
    permutation.py       keyed permutations evaluated where asked: the sampler's tie-breaking
    loader.py            the resumable loader of token-budget batches
    sentences.py         English text into sentences, and translations back into text
    data_location.py     where a checkpoint's data was found, and finding it again
    datamodule.py        the Lightning data module (the only one here importing Lightning)

Only :mod:`seq2seq.data.datamodule` imports Lightning; it is loaded lazily so that importing
``seq2seq.data`` for tokenization or batching stays light.
"""

from typing import Any

from seq2seq.data.batching import Batch, collate, example_length
from seq2seq.data.clean import CleanReport, clean_pairs, normalize_en, normalize_zh
from seq2seq.data.loader import TokenBatchLoader
from seq2seq.data.sampler import TokenBatchSampler, padding_fraction
from seq2seq.data.sources import (
    CorpusSpec,
    load_bundled,
    load_corpus,
    load_hf,
    load_jsonl,
    load_text_pair,
    load_tsv,
)
from seq2seq.data.split import bucket, split_name, split_pairs
from seq2seq.data.tokenized_pairs import TokenizedPairs
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from seq2seq.errors import DataError

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "UNK_ID",
    "Batch",
    "CleanReport",
    "CorpusSpec",
    "DataError",
    "TokenBatchLoader",
    "TokenBatchSampler",
    "Tokenizer",
    "TokenizedPairs",
    "TranslationDataModule",
    "bucket",
    "clean_pairs",
    "collate",
    "example_length",
    "load_bundled",
    "load_corpus",
    "load_hf",
    "load_jsonl",
    "load_text_pair",
    "load_tsv",
    "normalize_en",
    "normalize_zh",
    "padding_fraction",
    "split_name",
    "split_pairs",
]


def __getattr__(name: str) -> Any:
    # Lazy: Lightning takes seconds to import and model/search code never needs it.
    if name == "TranslationDataModule":
        from seq2seq.data.datamodule import TranslationDataModule

        return TranslationDataModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
