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
- Marian: ``MarianConfig`` with the config's d_model, heads, layers, d_ff, dropouts,
  activation and positions; post-LN and sinusoidal positions (Marian's only choices), embeddings
  scaled by sqrt(d_model) and shared by encoder, decoder and output projection; our vocabulary
  and special ids (pad 0, bos 2 = decoder start, eos 3). Hugging Face's own initialisation
  (normal, std ``init_std`` = 0.02) is kept: it is part of the reference implementation.
  A plain PyTorch loop trains it on ``TranslationDataModule.train_dataloader()`` (same
  tokenizer, ``max_tokens``, seed, and per-epoch batch order as Lightning's) with our recipe:
  the optimizer and schedule come from ``TranslationModule.configure_optimizers`` itself
  (AdamW with the config's betas/eps/weight decay, inverse-sqrt warmup with ``warmup_steps``
  and ``lr_scale``, the optional ``cooldown_steps`` before ``max_steps``), gradient-norm
  clipping at ``trainer.gradient_clip_val``, label-smoothed cross-entropy over non-pad
  targets (``F.cross_entropy(label_smoothing=..., ignore_index=pad)``). Like Lightning's
  ``max_time``/``max_steps`` it stops after the first update past ``--minutes`` or at
  ``max_steps``, whichever comes first.
- Decoding, both: the same test sentences (NFKC-normalised and cut to ``max_positions`` tokens
  as our ``Translator`` does), beam ``--beam-size``, at most ``int(max_len_a * src_len) +
  max_len_b`` output tokens with eos forced at that limit, pad and bos never generated.
  Marian decodes with ``generate(num_beams, max_new_tokens, length_penalty, early_stopping=True,
  forced_eos_token_id)``, batched by exact source length so each sentence gets its own limit.
  Known difference: Hugging Face ranks finished beams by ``logP / len ** alpha``, ours by the
  GNMT penalty ``logP / ((5 + len) / 6) ** alpha``; both use the config's alpha (0.6).

The two trainings run one after the other (ours in a subprocess), never at once. From the
repository root:

    python scripts/compare_marian.py --minutes 10   # the full comparison, ~20 min on 2 cores
    python scripts/compare_marian.py --minutes 0.5 --threads 1 --out /tmp/compare   # smoke test

Results: a table on stdout and OUT/results.json (plus hypotheses in OUT/*.hyp.zh).
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
import yaml

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3  # seq2seq.data.tokenizer's fixed special ids


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


# -- configuration ---------------------------------------------------------------------------


def load_config(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def model_settings(config: dict[str, Any]) -> dict[str, Any]:
    """TranslationModule's arguments: the config's values over the class defaults."""
    from seq2seq.config import ModelConfig
    from seq2seq.search import SearchConfig
    from seq2seq.training import TranslationModule

    model = config.get("model", {})
    defaults = {
        name: p.default
        for name, p in inspect.signature(TranslationModule).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    settings = {**defaults, **{k: v for k, v in model.items() if k not in ("config", "search")}}
    settings["config"] = {**ModelConfig().to_dict(), **model.get("config", {})}
    settings["search"] = {
        **{k: getattr(SearchConfig(), k) for k in ("max_len_a", "max_len_b", "length_penalty")},
        **model.get("search", {}),
    }
    return settings


def max_time_string(minutes: float) -> str:
    """Lightning's ``max_time`` "DD:HH:MM:SS" for a (possibly fractional) number of minutes."""
    seconds = max(1, round(minutes * 60))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{mins:02d}:{secs:02d}"


def ours_config(config: dict[str, Any], out: Path, args: argparse.Namespace) -> dict:
    """A copy of ``config`` that trains for ``--minutes`` and writes everything under ``out``."""
    config = copy.deepcopy(config)
    trainer = config.setdefault("trainer", {})
    trainer["max_time"] = max_time_string(args.minutes)
    if args.max_steps is not None:
        trainer["max_steps"] = args.max_steps
    # Snapshots are for averaging, which this comparison does not do; each costs our clock.
    trainer["callbacks"] = []
    if not args.ours_validate:
        trainer["limit_val_batches"] = 0
    trainer["logger"] = {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": str(out), "name": "logs"},
    }
    trainer["default_root_dir"] = str(out)
    config.setdefault("checkpoint", {})["dirpath"] = str(out / "checkpoints")
    config["checkpoint"]["overwrite"] = True  # a rerun replaces the previous comparison
    return config


def thread_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


# -- data ------------------------------------------------------------------------------------


def make_datamodule(config: dict[str, Any]):
    """The config's TranslationDataModule, prepared and set up (reads the cache if present)."""
    from seq2seq.data.datamodule import TranslationDataModule

    data = dict(config.get("data", {}))
    data.setdefault("seed", config.get("seed_everything", 1))
    datamodule = TranslationDataModule(**data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def replay_train_tokens(datamodule, steps: int) -> int:
    """Non-pad source+target tokens of the first ``steps`` training batches (epochs repeat).

    The batch order depends only on (seed, epoch), so this is what Lightning fed our model.
    """
    from seq2seq.data.batching import TokenBatchSampler

    data = datamodule.dataset("train")
    per_example = data.side_lengths("src") + data.side_lengths("tgt") + 1  # tgt_out has eos
    sampler = TokenBatchSampler(
        data.lengths(), datamodule.max_tokens, shuffle=True, seed=datamodule.seed
    )
    tokens, epoch = 0, 0
    while steps > 0:
        batches = sampler.rank_batches(epoch)[:steps]
        tokens += sum(int(per_example[b].sum()) for b in batches)
        steps -= len(batches)
        epoch += 1
    return tokens


# -- ours ------------------------------------------------------------------------------------


def train_ours(args: argparse.Namespace, config: dict[str, Any], out: Path) -> Path:
    """Runs ``seq2seq fit`` in a subprocess; returns the last checkpoint."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(ours_config(config, out, args)))
    command = [sys.executable, "-m", "seq2seq.cli", "fit", "--config", str(path)]
    print(f"== ours: {' '.join(command)}", flush=True)
    subprocess.run(command, check=True, env=thread_env(args.threads))
    last = out / "checkpoints" / "last.ckpt"
    if not last.is_file():
        raise SystemExit(f"compare_marian.py: seq2seq fit wrote no {last}")
    return last


def ours_training_stats(checkpoint_path: Path, datamodule) -> dict[str, Any]:
    """Parameters, optimizer steps, tokens and training seconds of one of our checkpoints."""
    from seq2seq.translator import read_checkpoint

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
    from seq2seq.translator import Translator

    translator = Translator.from_checkpoint(checkpoint_path)
    start = time.perf_counter()
    hypotheses = translator.translate(sources, beam_size=beam_size)
    return hypotheses, time.perf_counter() - start, translator.model.num_parameters()


# -- Marian ----------------------------------------------------------------------------------


def build_marian(settings: dict[str, Any], vocab_size: int):
    """MarianMTModel with our model's shape, vocabulary and special ids (freshly initialised)."""
    from transformers import MarianMTModel

    from seq2seq.config import ModelConfig
    from seq2seq.export import check_exportable, marian_config

    mc = {**settings["config"], "vocab_size": vocab_size}
    config = ModelConfig.from_dict(mc)
    try:
        check_exportable(config)
    except ValueError as error:
        raise SystemExit(f"compare_marian.py: {error}") from None
    return MarianMTModel(marian_config(config))


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    # parameters() yields the tied embedding once; Marian's sinusoid table is frozen.
    return [p for p in model.parameters() if p.requires_grad]


def marian_loss(model, batch, label_smoothing: float) -> torch.Tensor:
    """Mean label-smoothed cross-entropy over the non-pad target tokens of a batch."""
    logits = model(
        input_ids=batch.src,
        attention_mask=(batch.src != PAD_ID).long(),
        decoder_input_ids=batch.tgt_in,  # [bos] + tgt; right padding is hidden by causality
        use_cache=False,
    ).logits
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_out.flatten(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
    )


def recipe_optimizer(params: list[torch.nn.Parameter], settings: dict[str, Any], max_steps: int):
    """Our ``TranslationModule.configure_optimizers`` applied to ``params``: the identical
    optimizer and per-step schedule (warmup, lr_scale, cooldown over max_steps) by construction,
    so the comparison follows any change to our recipe."""
    from lightning.fabric.utilities.data import AttributeDict

    from seq2seq.config import ModelConfig
    from seq2seq.training import TranslationModule

    hparams = {k: v for k, v in settings.items() if k not in ("config", "search")}
    stand_in = SimpleNamespace(
        hparams=AttributeDict(hparams),
        config=ModelConfig(**settings["config"]),
        parameters=lambda: iter(params),
        trainer=SimpleNamespace(max_steps=max_steps),
        _trainer=True,
    )
    optimizers = TranslationModule.configure_optimizers(stand_in)
    scheduler = optimizers["lr_scheduler"]
    if scheduler.get("interval") != "step":
        raise SystemExit("compare_marian.py: expected a per-step learning-rate schedule")
    return optimizers["optimizer"], scheduler["scheduler"]


def train_marian(model, datamodule, settings, seconds: float, max_steps: int, clip: float):
    """Our recipe in a plain loop until ``seconds`` have passed or ``max_steps`` updates are
    done, like Lightning's max_time/max_steps; returns (steps, tokens, seconds)."""
    params = trainable_parameters(model)
    optimizer, scheduler = recipe_optimizer(params, settings, max_steps)
    loader = datamodule.train_dataloader()
    model.train()
    steps = tokens = epoch = 0
    start = time.perf_counter()
    while True:
        loader.set_epoch(epoch)  # Lightning does this every epoch: the same batch order
        for batch in loader:
            loss = marian_loss(model, batch, settings["label_smoothing"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            optimizer.step()
            scheduler.step()
            steps += 1
            tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
            elapsed = time.perf_counter() - start
            if steps % 20 == 0:
                print(
                    f"marian step {steps} epoch {epoch} loss {loss.item():.3f} "
                    f"{tokens / elapsed:.0f} tok/s {elapsed:.0f}s",
                    flush=True,
                )
            if elapsed >= seconds or 0 < max_steps <= steps:
                return steps, tokens, elapsed
        epoch += 1


@torch.no_grad()
def decode_marian(model, tokenizer, sources, beam_size, settings, max_tokens=4000):
    """Translate ``sources`` with ``generate``, batched by exact source length so that every
    sentence gets our limit ``int(a * len) + b`` (capped at max_positions), eos included."""
    from seq2seq.data.clean import normalize_en
    from seq2seq.search import SearchConfig
    from seq2seq.translator import one_line

    limit = settings["config"]["max_positions"]
    search = SearchConfig(**settings["search"])
    encoded = [tokenizer.encode(normalize_en(line))[:limit] for line in sources]
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, ids in enumerate(encoded):
        if ids:  # empty input, empty output, as in our Translator
            by_length[len(ids)].append(index)
    outputs = [""] * len(sources)
    model.eval()
    start = time.perf_counter()
    for length in sorted(by_length, reverse=True):
        indices = by_length[length]
        max_new = int(search.max_lengths(torch.tensor([length]), cap=limit)[0])
        per_batch = max(1, max_tokens // length)
        for first in range(0, len(indices), per_batch):
            rows = indices[first : first + per_batch]
            input_ids = torch.tensor([encoded[i] for i in rows])
            generated = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                num_beams=beam_size,
                do_sample=False,
                max_new_tokens=max_new,
                length_penalty=search.length_penalty,
                early_stopping=True,
                min_new_tokens=1,  # our search: no empty output, never pad, unk or bos
                suppress_tokens=[PAD_ID, UNK_ID, BOS_ID],
            )
            for index, row in zip(rows, generated.tolist(), strict=True):
                outputs[index] = one_line(tokenizer.decode(strip_specials(row)))
    return outputs, time.perf_counter() - start


def strip_specials(row: list[int]) -> list[int]:
    """Generated ids without the decoder start token, the eos and what follows it."""
    row = row[1:]
    return row[: row.index(EOS_ID)] if EOS_ID in row else [t for t in row if t != PAD_ID]


# -- report ----------------------------------------------------------------------------------


def score(name: str, hypotheses: list[str], references: list[list[str]], out: Path) -> dict:
    """sacreBLEU of ``hypotheses`` against each source's references (as ``seq2seq evaluate``)."""
    from seq2seq.evaluation import score_translations, reference_streams

    path = out / f"{name}.test.hyp.zh"
    path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    streams = reference_streams(references)
    return {**score_translations(hypotheses, streams), "hypotheses": str(path)}


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'model':<8} {'params':>10} {'steps':>7} {'train tok':>11} {'tok/s':>7} "
        f"{'BLEU':>6} {'chrF':>6} {'decode s':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        rate = f"{r['train_tok_per_s']:.0f}" if r["train_tok_per_s"] else "?"
        print(
            f"{r['model']:<8} {r['params']:>10,} {r['train_steps']:>7} {r['train_tokens']:>11,} "
            f"{rate:>7} {r['bleu']:>6.2f} {r['chrf']:>6.2f} {r['decode_seconds']:>9.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import transformers
    except ImportError:
        print(
            "compare_marian.py: needs Hugging Face transformers (pip install transformers)",
            file=sys.stderr,
        )
        return 2
    from lightning.pytorch import seed_everything

    from seq2seq.evaluation import group_references

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = load_config(args.config)
    settings = model_settings(config)
    seed = int(config.get("seed_everything", 1))
    trainer = config.get("trainer", {})
    clip = float(trainer.get("gradient_clip_val") or 0.0)
    max_steps = args.max_steps if args.max_steps is not None else trainer.get("max_steps", -1)

    # 1. Ours, in its own process (data is prepared and cached by the first run).
    if args.skip_ours:
        ours_ckpt = Path(args.ours_checkpoint)
    else:
        ours_ckpt = train_ours(args, config, out / "ours")

    # 2. Marian, on the same batches, for the same time.
    datamodule = make_datamodule(config)
    tokenizer = datamodule.tokenizer
    seed_everything(seed)
    marian = build_marian(settings, tokenizer.vocab_size)
    print(f"== marian: transformers {transformers.__version__}, {args.minutes} min", flush=True)
    steps, tokens, seconds = train_marian(
        marian, datamodule, settings, args.minutes * 60, max_steps, clip
    )
    marian.save_pretrained(out / "marian")

    # 3. The same test sentences, the same beam.
    # One item per distinct English sentence, with all its references, as `seq2seq evaluate`.
    sources, references = group_references(zip(*datamodule.split_texts("test"), strict=True))
    if args.limit_test is not None:
        sources, references = sources[: args.limit_test], references[: args.limit_test]
    print(f"== decoding {len(sources)} test sentences, beam {args.beam_size}", flush=True)
    ours_stats = ours_training_stats(ours_ckpt, datamodule)
    ours_hyps, ours_decode_s, ours_params = decode_ours(ours_ckpt, sources, args.beam_size)
    marian_hyps, marian_decode_s = decode_marian(
        marian, tokenizer, sources, args.beam_size, settings
    )

    ours_seconds = ours_stats["train_seconds"]
    rows = [
        {
            "model": "ours",
            "checkpoint": str(ours_ckpt),
            "params": ours_params,
            "train_steps": ours_stats["steps"],
            "train_tokens": ours_stats["train_tokens"],
            "train_seconds": ours_seconds,
            "train_tok_per_s": ours_stats["train_tokens"] / ours_seconds if ours_seconds else None,
            "decode_seconds": ours_decode_s,
            **score("ours", ours_hyps, references, out),
        },
        {
            "model": "marian",
            "checkpoint": str(out / "marian"),
            "params": sum(p.numel() for p in trainable_parameters(marian)),
            "train_steps": steps,
            "train_tokens": tokens,
            "train_seconds": seconds,
            "train_tok_per_s": tokens / seconds,
            "decode_seconds": marian_decode_s,
            **score("marian", marian_hyps, references, out),
        },
    ]
    print()
    print_table(rows)
    print(f"BLEU signature: {rows[0]['bleu_signature']}")
    print(f"chrF signature: {rows[0]['chrf_signature']}")
    result = {
        "minutes": args.minutes,
        "config": args.config,
        "beam_size": args.beam_size,
        "threads": torch.get_num_threads(),
        "test_sentences": len(sources),
        "max_steps": max_steps,
        "ours_validated_during_training": args.ours_validate,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "models": rows,
    }
    (out / "results.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"results: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
