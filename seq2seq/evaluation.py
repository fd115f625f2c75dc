"""sacreBLEU scoring, evaluation sets, and checkpoint averaging."""

from __future__ import annotations

import argparse
import inspect
import os
from pathlib import Path
from typing import Any

import torch

from seq2seq.translator import CheckpointError, read_checkpoint


def evaluate_translator(hypotheses: list[str], references: list[list[str]]) -> dict[str, Any]:
    """Corpus BLEU (``zh`` tokenizer) and chrF, with their sacreBLEU signatures.

    Args:
        hypotheses: one Chinese output per sentence.
        references: reference streams, each as long as ``hypotheses``.
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
    }


def load_eval_set(args: argparse.Namespace) -> tuple[list[str], list[list[str]], str]:
    """Sources, reference streams and a name, from --src/--ref files or a held-out split."""
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
    sources, targets = held_out_split(args.checkpoint, split)
    return sources, [targets], split


def held_out_split(checkpoint_path: str, split: str) -> tuple[list[str], list[str]]:
    """The dev/test pairs of the data a checkpoint was trained on (prepared again if needed)."""
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
    return datamodule.split_texts(split)


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
