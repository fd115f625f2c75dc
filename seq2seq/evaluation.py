"""Scoring translations: the one corpus BLEU / chrF scorer (``seq2seq evaluate``, validation
BLEU during training, the benchmarks), and the evaluation sets it scores: reference files or
the held-out split a checkpoint was trained with."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from seq2seq.checkpoint import read_checkpoint
from seq2seq.errors import CheckpointError, DataError
from seq2seq.textio import read_lines


def score_translations(hypotheses: list[str], references: list[list[str | None]]) -> dict[str, Any]:
    """Corpus BLEU (``zh`` tokenizer) and chrF, with their sacreBLEU signatures and the
    number of sentences and references scored.

    Args:
        hypotheses: one Chinese output per sentence.
        references: reference streams, each as long as ``hypotheses``; None where a sentence
            has fewer references than there are streams (see :func:`reference_streams`).
    """
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(tokenize="zh"), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, references)
    chrf_score = chrf.corpus_score(hypotheses, references)
    return {
        "bleu": round(bleu_score.score, 2),
        "chrf": round(chrf_score.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hypotheses),
        "references": sum(ref is not None for stream in references for ref in stream),
    }


def group_references(pairs: Iterable[tuple[str, str]]) -> tuple[list[str], list[list[str]]]:
    """One test item per distinct source: the sources in order of first appearance, and each
    one's references in corpus order.

    A held-out split can hold several Chinese translations of one English sentence (the split
    puts each English sentence in one split only). Scored as separate pairs, the source would
    be translated and counted once per translation, and each output compared with one of
    them; grouped, it is one item that may match any of its references.
    """
    references: dict[str, list[str]] = {}
    for source, reference in pairs:
        references.setdefault(source, []).append(reference)
    return list(references), list(references.values())


def reference_streams(references: list[list[str]]) -> list[list[str | None]]:
    """Per-item reference lists as sacreBLEU's streams: stream ``k`` holds every item's
    ``k``-th reference, padded with None where an item has fewer.

    sacreBLEU (>= 2.0) drops None from a segment's references. An empty string would instead
    count as a real, empty reference: it changes BLEU's closest reference length.

    Shape: ``len(references)`` items -> ``max(len(r) for r in references)`` streams, each
    ``len(references)`` long.
    """
    n_streams = max(map(len, references), default=0)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(n_streams)]


def load_eval_set(
    checkpoint: str | Path,
    split: str | None = None,
    src: str | None = None,
    refs: list[str] | None = None,
    engine: str = "torch",
) -> tuple[list[str], list[list[str | None]], str]:
    """Sources, reference streams and a name: from a source file and its reference files, or
    else from the held-out ``split`` (default test) of the data ``checkpoint`` was trained on
    (one item per distinct English sentence, with all its references)."""
    if src:
        if not refs:
            raise DataError("evaluate: --src needs at least one --ref file")
        sources = read_lines(src)
        references = [read_lines(path) for path in refs]
        for path, stream in zip(refs, references, strict=True):
            if len(stream) != len(sources):
                raise DataError(
                    f"{path}: {len(stream)} reference lines but {src} has {len(sources)}"
                )
        return sources, references, Path(src).stem
    split = split or "test"
    if engine != "torch":
        raise DataError("evaluate: with --engine ctranslate2, give --src and --ref files")
    sources, references = held_out_split(checkpoint, split)
    return sources, reference_streams(references), split


def held_out_split(checkpoint_path: str | Path, split: str) -> tuple[list[str], list[list[str]]]:
    """The dev/test set of the data a checkpoint was trained on (prepared again if needed), as
    :func:`group_references` items: distinct English sources and each one's references."""
    from seq2seq.data.datamodule import TranslationDataModule

    checkpoint = read_checkpoint(checkpoint_path)
    hparams = checkpoint.get("datamodule_hyper_parameters")
    if not hparams:
        raise CheckpointError(
            f"{checkpoint_path}: no data settings stored; evaluate with --src and --ref, or "
            "--data-from a checkpoint trained on the data"
        )
    # Lightning adds bookkeeping entries (e.g. '_instantiator'); keep the constructor's own.
    accepted = inspect.signature(TranslationDataModule).parameters
    settings = {k: v for k, v in hparams.items() if k in accepted}
    if settings.get("tokenizer_from"):
        # A fine-tuned checkpoint holds the tokenizer its data was cut with: read it there, so
        # the checkpoint it started from may have moved (same bytes, same cache).
        settings["tokenizer_from"] = str(checkpoint_path)
    datamodule = TranslationDataModule(**settings)
    datamodule.prepare_data()
    sources, targets = datamodule.split_texts(split)
    return group_references(zip(sources, targets, strict=True))
