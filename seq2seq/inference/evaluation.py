"""Scoring translations: the one corpus BLEU / chrF scorer (``seq2seq evaluate``, validation
BLEU during training, the benchmarks), the evaluation sets it scores (reference files, or the
held-out split a checkpoint was trained with) and the names their hypotheses are saved under."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from seq2seq.errors import CheckpointError, DataError
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.textio import read_lines


def sentence_chrf() -> Callable[[str, list[str]], float]:
    """sacreBLEU's sentence chrF as a function of (hypothesis, references): one scorer,
    built once, for scoring many sentences (calibration's targets, distillation's n-best)."""
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    return lambda hypothesis, references: chrf.sentence_score(hypothesis, references).score


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


EVAL_JSON_FIELDS = ("bleu", "chrf", "bleu_signature", "chrf_signature")


def read_eval_json(path: str | Path) -> dict[str, Any]:
    """A ``seq2seq evaluate --json`` result read back (``export --eval-json``).

    Raises:
        DataError: not JSON, or not an ``evaluate --json`` result (naming what is missing).
    """
    import json

    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError.at(
            path, None, f"not JSON ({error}); give 'seq2seq evaluate --json' output"
        ) from None
    missing = [k for k in EVAL_JSON_FIELDS if not isinstance(result, dict) or k not in result]
    if missing:
        raise DataError.at(
            path, None, f"not 'seq2seq evaluate --json' output (no {', '.join(missing)})"
        )
    return result


def print_progress(line: str) -> None:
    """A progress line on stderr (stdout holds the results, e.g. ``evaluate --json``)."""
    print(line, file=sys.stderr, flush=True)


def load_eval_set(
    checkpoint: str | Path,
    split: str | None = None,
    src: str | None = None,
    refs: list[str] | None = None,
    engine: str = "torch",
    progress: Callable[[str], None] = print_progress,
) -> tuple[list[str], list[list[str | None]], str]:
    """Sources, reference streams and a name: from a source file and its reference files, or
    else from the held-out ``split`` (default test) of the data ``checkpoint`` was trained on
    (one item per distinct English sentence, with all its references).

    The name tells the hypotheses files apart (:func:`hypotheses_path`): the split (``test``),
    or the source's stem and a digest of the files (``test-3f2a9c1d``), which never equals a
    split nor the name of other files. ``progress`` gets the lines of a data preparation
    (a split whose cache is gone: minutes for a big corpus).
    """
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
        return sources, references, files_name(src, *refs)
    split = split or "test"
    if engine != "torch":
        raise DataError("evaluate: with --engine ctranslate2, give --src and --ref files")
    sources, references = held_out_split(checkpoint, split, progress)
    return sources, reference_streams(references), split


def files_name(*paths: str | Path) -> str:
    """``<stem of the first>-<8 hex digits>``: a digest of the resolved paths, so that two
    source files of one stem (or one source with other references) get different names."""
    resolved = "\n".join(str(Path(path).resolve()) for path in paths)
    return f"{Path(paths[0]).stem}-{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"


def hypotheses_path(checkpoint: str | Path, name: str, data_from: str | Path | None = None) -> Path:
    """Where ``evaluate`` writes the hypotheses of eval set ``name`` (:func:`load_eval_set`):
    beside the checkpoint, ``last.test.hyp.zh`` or ``last.test-3f2a9c1d.hyp.zh``. A split of
    another checkpoint's data (``--data-from``) adds that checkpoint's :func:`files_name`."""
    if data_from is not None:
        name = f"{name}-of-{files_name(data_from)}"
    return Path(checkpoint).with_suffix(f".{name}.hyp.zh")


def eval_set_label(name: str, src: str | None = None, data_from: str | None = None) -> str:
    """What was scored, for the ``eval_set`` of ``evaluate --json`` (and so the model card of
    ``export --eval-json``): the source file as given, or the split (and whose data)."""
    if src:
        return src
    return f"{name} split of {data_from}" if data_from else name


def held_out_split(
    checkpoint_path: str | Path, split: str, progress: Callable[[str], None] = print_progress
) -> tuple[list[str], list[list[str]]]:
    """The dev/test set of the data a checkpoint was trained on (prepared again if needed), as
    :func:`group_references` items: distinct English sources and each one's references.

    The data is found from any directory (see ``TranslationDataModule.trained_with``);
    ``progress`` gets the lines of a preparation.
    """
    sources, targets = split_of_checkpoint(checkpoint_path, split, progress)
    return group_references(zip(sources, targets, strict=True))


def split_of_checkpoint(
    checkpoint_path: str | Path, split: str, progress: Callable[[str], None] = print_progress
) -> tuple[list[str], list[str]]:
    """One split of the data a checkpoint was trained on, pair by pair: its English sources
    and their Chinese targets, in the cache's order (``train``, ``dev`` or ``test``)."""
    from seq2seq.data.datamodule import TranslationDataModule

    checkpoint = read_checkpoint(checkpoint_path)
    hparams = checkpoint.get("datamodule_hyper_parameters")
    if not hparams:
        raise CheckpointError(
            f"{checkpoint_path}: no data settings stored; evaluate with --src and --ref, or "
            "--data-from a checkpoint trained on the data"
        )
    try:
        datamodule = TranslationDataModule.trained_with(hparams, checkpoint_path)
    except DataError as error:
        raise DataError(f"{error}; evaluate with --src and --ref files instead") from None
    datamodule.prepare_data(progress)
    return datamodule.split_texts(split)
