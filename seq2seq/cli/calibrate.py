"""``seq2seq calibrate``: fit a checkpoint's confidence to chrF on its dev split, store it there.

The dev split (or ``--src``/``--ref`` files) is translated with the checkpoint's search, each
sentence scored by sentence chrF against its references, and ``confidence.fit`` maps the
search's signals to it (``seq2seq.inference.confidence``). The fit goes into the checkpoint
(written atomically; ``--output`` for a copy). ``--report test`` then measures it on a split it
was not fitted on: Spearman correlation with chrF, beside the length-normalised log-probability
alone; the mean chrF of the most confident 80%; calibration by tenths; and the time it adds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def add_calibrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a .ckpt written by 'seq2seq fit'")
    p.add_argument(
        "--beam-size", type=int, default=5, help="beam width it is fitted for (%(default)s)"
    )
    p.add_argument("--split", choices=("dev", "test"), default="dev", help="fit on (%(default)s)")
    p.add_argument("--src", help="English file to fit on (instead of --split)")
    p.add_argument("--ref", action="append", help="its Chinese reference file; repeat for more")
    p.add_argument(
        "--report",
        choices=("test", "dev", "none"),
        default="test",
        help="measure the fit on this split afterwards (%(default)s)",
    )
    p.add_argument("--output", help="write the calibrated checkpoint here (default: in place)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(run=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from seq2seq import checks
    from seq2seq.inference.checkpoint import (
        CHECKPOINT_KEY,
        CONFIDENCE_KEY,
        atomic_save,
        read_checkpoint,
    )
    from seq2seq.inference.confidence import fit
    from seq2seq.inference.translator import Translator

    output = args.output or args.checkpoint
    checks.writable_file(output, "calibrated checkpoint")
    translator = Translator.from_checkpoint(args.checkpoint)
    name, values, chrf, _, _ = _scored(translator, args, args.split, args.src, args.ref)
    calibration = fit(values, chrf, f"{name}: {len(chrf):,} sentences, beam {args.beam_size}")
    checkpoint = read_checkpoint(args.checkpoint)
    checkpoint[CHECKPOINT_KEY][CONFIDENCE_KEY] = calibration.to_dict()
    atomic_save(checkpoint, output)
    print(f"calibrated on {calibration.fitted_on}; written to {output}", file=sys.stderr)
    if args.report != "none":
        translator.calibration = calibration
        report = _report(translator, args)
        print(json.dumps(report) if args.json else _table(report))
    return 0


def _scored(translator, args, split, src=None, refs=None):  # noqa: ANN001, ANN202
    """(name, signals (N, 3), sentence chrF (N,), each hypothesis's length-normalised score
    (N,), decoding seconds) of the split's sentences, each translated as one sentence."""
    from seq2seq.inference.evaluation import load_eval_set, sentence_chrf
    from seq2seq.inference.options import TranslateOptions

    sources, references, name = load_eval_set(args.checkpoint, split, src, refs)
    options = TranslateOptions(beam_size=args.beam_size, split=False)
    start = time.process_time()
    found = translator.translate_sentences(sources, options)
    seconds = time.process_time() - start
    chrf, kept, values, scores = sentence_chrf(), [], [], []
    for i, translation in enumerate(found):
        refs_i = [stream[i] for stream in references if stream[i] is not None]
        if translation.signals and refs_i:
            text = translation.texts[0]
            kept.append(chrf(text, refs_i))
            values.append(translation.signals)
            scores.append(translation.hypotheses[0].score)
    if len(kept) < 2:
        raise ValueError(f"{name}: fewer than 2 translated sentences with references to fit on")
    return name, np.array(values), np.array(kept), np.array(scores), seconds


def _report(translator, args) -> dict:  # noqa: ANN001
    """The fit measured on ``args.report``'s sentences."""
    name, values, chrf, scores, decode_s = _scored(translator, args, args.report)
    start = time.process_time()
    confidence = np.array([translator.calibration(v) for v in values])
    confidence_s = time.process_time() - start
    top = np.argsort(-confidence, kind="stable")[: int(0.8 * len(confidence))]
    tenths = np.array_split(np.argsort(confidence, kind="stable"), 10)
    return {
        "split": name,
        "sentences": len(chrf),
        "spearman": spearman(confidence, chrf),
        "spearman_length_normalised_log_prob": spearman(scores, chrf),
        "mean_chrf": float(chrf.mean()),
        "mean_chrf_most_confident_80": float(chrf[top].mean()),
        "tenths": [
            {"confidence": float(confidence[t].mean()), "chrf": float(chrf[t].mean()) / 100}
            for t in tenths
        ],
        "confidence_seconds": confidence_s,
        "decode_seconds": decode_s,
    }


def _table(report: dict) -> str:
    lines = [
        f"{report['split']}: {report['sentences']:,} sentences",
        f"Spearman with sentence chrF: confidence {report['spearman']:.3f}, "
        f"length-normalised log-probability {report['spearman_length_normalised_log_prob']:.3f}",
        f"mean chrF: all {report['mean_chrf']:.2f}, the most confident 80% "
        f"{report['mean_chrf_most_confident_80']:.2f}",
        "tenths by confidence (mean confidence / mean chrF/100): "
        + ", ".join(f"{t['confidence']:.2f}/{t['chrf']:.2f}" for t in report["tenths"]),
        f"time: confidence {report['confidence_seconds']:.3f} s for "
        f"{report['decode_seconds']:.1f} s of decoding "
        f"({100 * report['confidence_seconds'] / max(report['decode_seconds'], 1e-9):.2f}%)",
    ]
    return "\n".join(lines)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties take their mean rank)."""
    return float(np.corrcoef(_ranks(np.asarray(a)), _ranks(np.asarray(b)))[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    ordered = x[order]
    for value in np.unique(ordered[np.r_[np.diff(ordered) == 0, False]]):
        ranks[x == value] = ranks[x == value].mean()
    return ranks
