"""sacreBLEU scoring, evaluation sets, and checkpoint averaging."""

from __future__ import annotations

import argparse
import inspect
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from seq2seq.translator import CheckpointError, read_checkpoint


def evaluate_translator(
    hypotheses: list[str], references: list[list[str | None]]
) -> dict[str, Any]:
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


def load_eval_set(args: argparse.Namespace) -> tuple[list[str], list[list[str | None]], str]:
    """Sources, reference streams and a name, from --src/--ref files or a held-out split
    (one item per distinct English sentence, with all its references)."""
    from seq2seq.cli import read_lines
    from seq2seq.data.errors import DataError

    if args.src:
        if not args.ref:
            raise DataError("evaluate: --src needs at least one --ref file")
        sources = read_lines(args.src)
        references = [read_lines(path) for path in args.ref]
        for path, stream in zip(args.ref, references, strict=True):
            if len(stream) != len(sources):
                raise DataError(
                    f"{path}: {len(stream)} reference lines but {args.src} has {len(sources)}"
                )
        return sources, references, Path(args.src).stem
    split = args.split or "test"
    if getattr(args, "engine", "torch") != "torch":
        raise DataError("evaluate: with --engine ctranslate2, give --src and --ref files")
    sources, references = held_out_split(args.checkpoint, split)
    return sources, reference_streams(references), split


def held_out_split(checkpoint_path: str, split: str) -> tuple[list[str], list[list[str]]]:
    """The dev/test set of the data a checkpoint was trained on (prepared again if needed), as
    :func:`group_references` items: distinct English sources and each one's references."""
    from seq2seq.data.datamodule import TranslationDataModule

    checkpoint = read_checkpoint(checkpoint_path)
    hparams = checkpoint.get("datamodule_hyper_parameters")
    if not hparams:
        raise CheckpointError(
            f"{checkpoint_path}: no data settings stored; evaluate with --src and --ref"
        )
    # Lightning adds bookkeeping entries (e.g. '_instantiator'); keep the constructor's own.
    accepted = inspect.signature(TranslationDataModule).parameters
    datamodule = TranslationDataModule(**{k: v for k, v in hparams.items() if k in accepted})
    datamodule.prepare_data()
    sources, targets = datamodule.split_texts(split)
    return group_references(zip(sources, targets, strict=True))


def average_checkpoints(paths: list[str], output: str) -> None:
    """Write a checkpoint whose weights are the mean of ``paths``' (Vaswani et al. §6.1).

    The result keeps the last checkpoint's config, tokenizer and bookkeeping, but no optimizer
    state: it is for translation and evaluation, not for resuming training.
    """
    if not paths:
        raise CheckpointError("average: no checkpoints given")
    checkpoints = [read_checkpoint(p) for p in paths]
    keys = checkpoints[-1]["state_dict"].keys()
    for path, checkpoint in zip(paths, checkpoints, strict=True):
        if checkpoint["state_dict"].keys() != keys:
            raise CheckpointError(f"{path}: parameters differ from {paths[-1]}")
    averaged = {}
    for key in keys:
        tensors = [c["state_dict"][key] for c in checkpoints]
        if tensors[0].is_floating_point():
            averaged[key] = torch.stack([t.double() for t in tensors]).mean(0).to(tensors[0].dtype)
        else:
            averaged[key] = tensors[-1]
    result = {
        k: v
        for k, v in checkpoints[-1].items()
        if k not in ("optimizer_states", "lr_schedulers", "loops", "callbacks")
    }
    result["state_dict"] = averaged
    result["averaged_from"] = [str(p) for p in paths]
    atomic_torch_save(result, output)


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save to a temporary file, then rename: a crash never leaves a truncated file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
