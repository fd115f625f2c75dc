"""Our Transformer vs Hugging Face ``MarianMTModel`` as the same model, side by side.

What it measures: test-set sacreBLEU (``zh`` tokenizer) and chrF of two models of the same
shape, trained on this machine for the same wall-clock time on the same batches, decoded with
the same beam. It is the reference comparison for "our BLEU must be at least as high as the
reference implementation's".

- Ours: ``seq2seq fit`` on a copy of ``--config`` (written to OUT/ours/config.yaml) whose only
  changes are bookkeeping: ``trainer.max_time`` = ``--minutes`` (``trainer.max_steps`` stays
  the config's unless ``--max-steps``), logs and checkpoints under OUT/ours, no snapshot
  callbacks (nothing is averaged here) and, unless ``--ours-validate``, no periodic
  validation, so that both clocks measure training only. The LAST checkpoint
  (not an average) is scored with our ``Translator``, exactly as
  ``seq2seq evaluate --checkpoint OUT/ours/checkpoints/last.ckpt --split test`` does.
- Marian: ``MarianMTModel`` configured as the same model (``benchmarks.reference``: the
  config's d_model, heads, layers, d_ff, dropouts, activation and positions; post-LN and
  sinusoidal positions, Marian's only choices; embeddings scaled by sqrt(d_model) and shared by
  encoder, decoder and output projection; our vocabulary and the model config's special ids,
  bos = decoder start), with Hugging Face's own initialisation (normal, std ``init_std`` =
  0.02), part of the reference implementation. A plain PyTorch loop (``benchmarks.train``)
  trains it on ``TranslationDataModule.train_dataloader()`` (same tokenizer, ``max_tokens``,
  seed, and per-epoch batch order as Lightning's) with our recipe, every setting resolved from
  ``--config`` by ``seq2seq fit``'s own parser: the optimizer and schedule of
  ``seq2seq.training.schedule.paper_optimizer``, the function
  ``TranslationModule.configure_optimizers`` calls (AdamW with the config's betas/eps/weight decay,
  inverse-sqrt warmup with ``warmup_steps`` and ``lr_scale``, the optional ``cooldown_steps`` before
  ``max_steps``, the
  schedule following the larger of step / max_steps and elapsed / ``--minutes`` as ours does
  under ``max_time``), gradient-norm clipping at ``trainer.gradient_clip_val``, label-smoothed
  cross-entropy over non-pad targets (``F.cross_entropy(label_smoothing=...,
  ignore_index=pad)``). Like Lightning's ``max_time``/``max_steps`` it stops after the first
  update past ``--minutes`` or at ``max_steps``, whichever comes first.
- Decoding, both: the same test sentences (NFKC-normalised and cut to ``max_positions`` tokens
  as our ``Translator`` does), beam ``--beam-size``, at most ``int(max_len_a * src_len) +
  max_len_b`` output tokens with eos forced at that limit, pad, unk and bos never generated.
  Marian decodes with ``generate(num_beams, max_new_tokens, length_penalty, early_stopping=True,
  forced_eos_token_id)``, batched by exact source length so each sentence gets its own limit.
  Known difference: Hugging Face ranks finished beams by ``logP / len ** alpha``, ours by the
  GNMT penalty ``logP / ((5 + len) / 6) ** alpha``; both use the config's alpha (0.6).

The two trainings run one after the other (ours in a subprocess), never at once. From the
repository root:

    python scripts/bench.py compare-marian --minutes 10   # the full comparison, ~20 min, 2 cores
    python scripts/bench.py compare-marian --minutes 0.5 --threads 1 --out /tmp/c   # smoke test

Results: a table on stdout and OUT/results.json (plus hypotheses in OUT/*.hyp.zh).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.decoders import translate_marian
from benchmarks.harness import timed
from benchmarks.recipe import Recipe, fit_config, load_recipe
from benchmarks.reference import trainable_parameters
from benchmarks.report import print_comparison, score
from benchmarks.train import model_and_loss, replay_train_tokens, run_fit, train_for
from seq2seq.inference.options import TranslateOptions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train our Transformer and HF MarianMTModel (same shape, data, recipe and "
        "wall-clock budget) and compare test BLEU/chrF with the same beam.",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=10.0,
        help="training wall-clock per model, fractions allowed (default 10)",
    )
    parser.add_argument(
        "--config",
        default="configs/tiny.yaml",
        help="our training config (default configs/tiny.yaml)",
    )
    parser.add_argument("--beam-size", type=int, default=5, help="beam for both (default 5)")
    parser.add_argument(
        "--out", default="runs/compare", help="output directory (default runs/compare)"
    )
    parser.add_argument(
        "--skip-ours",
        action="store_true",
        help="do not train ours; score --ours-checkpoint instead",
    )
    parser.add_argument("--ours-checkpoint", help="our checkpoint to score with --skip-ours")
    parser.add_argument(
        "--ours-validate",
        action="store_true",
        help="keep the config's periodic validation in our run (it then eats into our clock)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="update limit for both, which also places the cooldown (default: the config's "
        "trainer.max_steps); training ends at --minutes or here, whichever comes first",
    )
    parser.add_argument(
        "--limit-test",
        type=int,
        default=None,
        help="score only the first N test sentences (for smoke tests; default all)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads for both models (default: torch's default)",
    )
    args = parser.parse_args(argv)
    if args.skip_ours and not args.ours_checkpoint:
        parser.error("--skip-ours needs --ours-checkpoint")
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    return args


def max_time_string(minutes: float) -> str:
    """Lightning's ``max_time`` "DD:HH:MM:SS" for a (possibly fractional) number of minutes."""
    seconds = max(1, round(minutes * 60))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{mins:02d}:{secs:02d}"


# -- ours ------------------------------------------------------------------------------------


def train_ours(args: argparse.Namespace, recipe: Recipe, out: Path) -> Path:
    """Runs ``seq2seq fit`` on a copy of the config that trains for ``--minutes`` and writes
    everything under ``out``; returns the last checkpoint."""
    out.mkdir(parents=True, exist_ok=True)
    trainer: dict[str, Any] = {"max_time": max_time_string(args.minutes)}
    if args.max_steps is not None:
        trainer["max_steps"] = args.max_steps
    if not args.ours_validate:
        trainer["limit_val_batches"] = 0
    # overwrite: a rerun replaces the previous comparison
    config = fit_config(recipe.yaml, out, trainer, checkpoint={"overwrite": True})
    run_fit(config, out, args.threads, label="ours")
    last = out / "checkpoints" / "last.ckpt"
    if not last.is_file():
        raise SystemExit(f"bench.py compare-marian: seq2seq fit wrote no {last}")
    return last


def ours_training_stats(checkpoint_path: Path, datamodule) -> dict[str, Any]:
    """Optimizer steps, tokens and training seconds of one of our checkpoints."""
    from seq2seq.inference.checkpoint import read_checkpoint

    checkpoint = read_checkpoint(checkpoint_path)
    steps = int(checkpoint["global_step"])
    seconds = None
    for key, state in checkpoint.get("callbacks", {}).items():
        if key.startswith("Timer"):
            seconds = state["time_elapsed"].get("train")
    stored = checkpoint.get("datamodule_hyper_parameters") or {}
    differing = {k for k, v in stored.items() if getattr(datamodule, k, v) != v}
    differing &= {"vocab_size", "max_tokens", "max_len", "seed", "corpus"}
    if differing:
        print(f"warning: {checkpoint_path} was trained with other data settings: {differing}")
    tokens = replay_train_tokens(datamodule, steps)
    return {"steps": steps, "train_tokens": tokens, "train_seconds": seconds}


def decode_ours(checkpoint_path: Path, sources: list[str], beam_size: int):
    """Our Translator on ``sources``: (hypotheses, seconds, parameters)."""
    from seq2seq.inference.translator import Translator

    translator = Translator.from_checkpoint(checkpoint_path)
    hypotheses, seconds = timed(
        translator.translate, sources, TranslateOptions(beam_size=beam_size)
    )
    return hypotheses, seconds, translator.engine.model.num_parameters()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import transformers
    except ImportError:
        print(
            "bench.py compare-marian: needs Hugging Face transformers (pip install transformers)",
            file=sys.stderr,
        )
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # Everything as `seq2seq fit --config` resolves it (--max-steps as its --trainer.max_steps).
    overrides = [] if args.max_steps is None else ["--trainer.max_steps", str(args.max_steps)]
    recipe = load_recipe(args.config, overrides)

    # 1. Ours, in its own process (data is prepared and cached by the first run).
    if args.skip_ours:
        ours_ckpt = Path(args.ours_checkpoint)
    else:
        ours_ckpt = train_ours(args, recipe, out / "ours")

    # 2. Marian, on the same batches, for the same time.
    datamodule = recipe.prepared_datamodule()
    marian, marian_training = train_marian(args, recipe, datamodule, transformers.__version__)
    marian.save_pretrained(out / "marian")

    # 3. The same test sentences, the same beam.
    sources, references = test_items(datamodule, args.limit_test)
    print(f"== decoding {len(sources)} test sentences, beam {args.beam_size}", flush=True)
    ours_stats = ours_training_stats(ours_ckpt, datamodule)
    ours_hyps, ours_decode_s, ours_params = decode_ours(ours_ckpt, sources, args.beam_size)
    marian_hyps, marian_decode_s = translate_marian(
        marian, datamodule.tokenizer, sources, args.beam_size, recipe.model
    )
    ours_scores = score("ours", ours_hyps, references, out)
    marian_scores = score("marian", marian_hyps, references, out)
    rows = [
        ours_row(ours_ckpt, ours_stats, ours_params, ours_decode_s, ours_scores),
        marian_row(out / "marian", marian, marian_training, marian_decode_s, marian_scores),
    ]
    print()
    print_comparison(rows)
    print(f"BLEU signature: {rows[0]['bleu_signature']}")
    print(f"chrF signature: {rows[0]['chrf_signature']}")
    save_results(args, recipe, rows, len(sources), out, transformers.__version__)
    return 0


def train_marian(
    args: argparse.Namespace, recipe: Recipe, datamodule: Any, transformers_version: str
) -> tuple[Any, tuple[int, int, float]]:
    """Marian trained on our recipe's batches for ``--minutes``; the model, and its steps,
    tokens and seconds."""
    from lightning.pytorch import seed_everything

    seed_everything(recipe.seed)
    marian, loss_fn = model_and_loss("marian", recipe.model)
    print(f"== marian: transformers {transformers_version}, {args.minutes} min", flush=True)
    training = train_for(
        marian,
        loss_fn,
        datamodule,
        recipe.model,
        recipe.gradient_clip_val,
        args.minutes * 60,
        recipe.max_steps,
        name="marian",
    )
    return marian, training


def test_items(datamodule: Any, limit: int | None) -> tuple[list[str], list[list[str]]]:
    """One item per distinct English test sentence, with all its references, as ``seq2seq
    evaluate`` reads them; the first ``limit`` of them."""
    from seq2seq.inference.evaluation import group_references

    sources, references = group_references(zip(*datamodule.split_texts("test"), strict=True))
    if limit is not None:
        sources, references = sources[:limit], references[:limit]
    return sources, references


def ours_row(
    checkpoint: Path, stats: dict[str, Any], params: int, decode_s: float, scores: dict
) -> dict[str, Any]:
    """Our model's row of the comparison."""
    seconds = stats["train_seconds"]
    return {
        "model": "ours",
        "checkpoint": str(checkpoint),
        "params": params,
        "train_steps": stats["steps"],
        "train_tokens": stats["train_tokens"],
        "train_seconds": seconds,
        "train_tok_per_s": stats["train_tokens"] / seconds if seconds else None,
        "decode_seconds": decode_s,
        **scores,
    }


def marian_row(
    checkpoint: Path,
    marian: Any,
    training: tuple[int, int, float],
    decode_s: float,
    scores: dict,
) -> dict[str, Any]:
    """Marian's row of the comparison."""
    steps, tokens, seconds = training
    return {
        "model": "marian",
        "checkpoint": str(checkpoint),
        "params": sum(p.numel() for p in trainable_parameters(marian)),
        "train_steps": steps,
        "train_tokens": tokens,
        "train_seconds": seconds,
        "train_tok_per_s": tokens / seconds,
        "decode_seconds": decode_s,
        **scores,
    }


def save_results(
    args: argparse.Namespace,
    recipe: Recipe,
    rows: list[dict[str, Any]],
    test_sentences: int,
    out: Path,
    transformers_version: str,
) -> None:
    """Writes the settings and both rows to ``out/results.json``, and says where."""
    result = {
        "minutes": args.minutes,
        "config": args.config,
        "beam_size": args.beam_size,
        "threads": torch.get_num_threads(),
        "test_sentences": test_sentences,
        "max_steps": recipe.max_steps,
        "ours_validated_during_training": args.ours_validate,
        "transformers_version": transformers_version,
        "torch_version": torch.__version__,
        "models": rows,
    }
    (out / "results.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"results: {out / 'results.json'}")
