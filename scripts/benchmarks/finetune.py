"""Fine-tuning, measured: does a pretrained translator get better at one domain, and what does
it cost the rest?

A model of ours stands in for a downloaded OPUS-MT one (no machine here reaches the hub): the
``configs/tiny.yaml`` model is exported to Hugging Face's ``MarianMTModel`` format and imported
back with ``seq2seq import``, exactly as ``Helsinki-NLP/opus-mt-en-zh`` would be. It is then
fine-tuned with ``configs/finetune.yaml`` on one domain of the bundled corpus, the HSK graded
sentences, and scored (sacreBLEU, tokenize zh, beam 5) before and after on

* the HSK test sentences (the in-domain test: the HSK pairs in the hash split's test buckets,
  the same sentences the bundled corpus holds out), and
* the bundled corpus' whole test split (Tatoeba + HSK), and its Tatoeba part alone.

HSK pairs whose English is a sentence of the bundled test split (with another translation)
are left out of the fine-tuning data, so nothing the general test asks was trained on.

    python scripts/bench.py finetune --checkpoint runs/demo/checkpoints/last.ckpt
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import ROOT, timed
from seq2seq.data.clean import normalize_en
from seq2seq.inference.evaluation import (
    group_references,
    held_out_split,
    reference_streams,
    score_translations,
)
from seq2seq.inference.options import TranslateOptions

Test = tuple[list[str], list[list[str]]]  # distinct sources, and each one's references


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--checkpoint",
        default="runs/demo/checkpoints/last.ckpt",
        help="the pretrained model (the demo's configs/tiny.yaml one)",
    )
    p.add_argument("--work", default="runs/bench_finetune", help="directory for every output")
    p.add_argument("--beam-size", type=int, default=5, help="beam for the scores (5)")
    p.add_argument(
        "--fit-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra fit option, e.g. --fit-option=--model.peak_lr=1e-4",
    )
    return p.parse_args(argv)


def stand_in_for_a_download(checkpoint: Path, work: Path) -> Path:
    """Our checkpoint -> MarianMTModel directory -> imported checkpoint."""
    from seq2seq.tools.export import export_hf
    from seq2seq.tools.pretrained import import_marian

    hf = export_hf(checkpoint, work / "hf")
    return import_marian(str(hf), work / "imported.ckpt")


def write_domain_corpus(general: Test, path: Path) -> int:
    """The HSK pairs as a TSV, without those whose English the general test asks with
    another translation. Returns how many were left out."""
    from seq2seq.data.sources import _load_hsk

    asked = {normalize_en(en): set(refs) for en, refs in zip(*general, strict=True)}
    kept, dropped = [], 0
    for en, zh in _load_hsk():
        refs = asked.get(normalize_en(en))
        if refs is not None and zh not in refs:
            dropped += 1
            continue
        kept.append(f"{en}\t{zh}\n")
    path.write_text("".join(kept), encoding="utf-8")
    return dropped


def domain_splits(tsv: Path, imported: Path, cache: Path) -> tuple[dict[str, Test], int]:
    """The in-domain dev and test sets as the fine-tuning run splits the TSV (neither is
    trained on; dev only gives the run's validation BLEU), and its training pair count."""
    from seq2seq.data.datamodule import TranslationDataModule

    data = TranslationDataModule(
        corpus="tsv", path=str(tsv), tokenizer_from=str(imported), cache_dir=str(cache)
    )
    data.prepare_data()
    splits = {
        split: group_references(zip(*data.split_texts(split), strict=True))
        for split in ("test", "dev")
    }
    return splits, len(data.split_texts("train")[0])


def bleu(checkpoint: Path, test: Test, beam: int) -> tuple[float, list[str]]:
    """sacreBLEU of ``checkpoint``'s translations of ``test``, and the translations."""
    from seq2seq.inference.translator import Translator

    sources, references = test
    outputs = Translator.from_checkpoint(checkpoint).translate(
        sources, TranslateOptions(beam_size=beam)
    )
    return score_translations(outputs, reference_streams(references))["bleu"], outputs


def reference_nll(checkpoint: Path, test: Test, batch_size: int = 64) -> float:
    """Mean negative log-likelihood per target token (eos included) of every reference
    given its source, teacher-forced: a far less noisy measure of fit than the BLEU of a
    few dozen sentences."""
    import torch
    import torch.nn.functional as F

    from seq2seq.data.batching import collate
    from seq2seq.inference.checkpoint import load_model

    loaded = load_model(checkpoint)
    model, tokenizer, config = loaded.model, loaded.tokenizer, loaded.model.config
    pairs = [
        (tokenizer.encode_source(normalize_en(en)), tokenizer.encode_target(zh))
        for en, refs in zip(*test, strict=True)
        for zh in refs
    ]
    total, tokens = 0.0, 0
    for start in range(0, len(pairs), batch_size):
        batch = collate(
            pairs[start : start + batch_size], config.pad_id, config.bos_id, config.eos_id
        )
        with torch.no_grad():
            logits = model(batch.src, batch.tgt_in)
        real = batch.tgt_out != config.pad_id
        total += F.cross_entropy(logits[real], batch.tgt_out[real], reduction="sum").item()
        tokens += int(real.sum())
    return total / tokens


def fine_tune(imported: Path, tsv: Path, work: Path, options: list[str]) -> tuple[Path, float]:
    config = ROOT / "configs" / "finetune.yaml"
    command = [
        sys.executable,
        "-m",
        "seq2seq",
        "fit",
        "--config",
        str(config),
        f"--model.init_from={imported}",
        f"--data.path={tsv}",
        f"--data.cache_dir={work / 'cache'}",
        f"--checkpoint.dirpath={work / 'checkpoints'}",
        f"--trainer.logger.init_args.save_dir={work}",
        "--trainer.enable_progress_bar=false",
        *options,
    ]
    _, seconds = timed(subprocess.run, command, check=True, cwd=ROOT)
    return work / "checkpoints" / "last.ckpt", seconds / 60


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    checkpoint = Path(args.checkpoint)
    imported = stand_in_for_a_download(checkpoint, work)
    general = held_out_split(checkpoint, "test")
    dropped = write_domain_corpus(general, work / "hsk.tsv")
    domain, n_train = domain_splits(work / "hsk.tsv", imported, work / "cache")
    in_domain = {normalize_en(en) for en in domain["test"][0]}
    tatoeba = [
        (en, refs) for en, refs in zip(*general, strict=True) if normalize_en(en) not in in_domain
    ]
    sets = {
        "HSK test": domain["test"],
        "HSK dev": domain["dev"],
        "bundled test": general,
        "its Tatoeba part": ([en for en, _ in tatoeba], [refs for _, refs in tatoeba]),
    }
    print(
        f"HSK: {n_train} fine-tuning pairs; {dropped} left out (their English is a general "
        f"test sentence)",
        flush=True,
    )
    before = {name: bleu(checkpoint, test, args.beam_size) for name, test in sets.items()}
    nll_before = {name: reference_nll(imported, test) for name, test in sets.items()}
    again = {name: bleu(imported, test, args.beam_size) for name, test in sets.items()}
    same = all(before[n][1] == again[n][1] for n in sets)
    tuned, minutes = fine_tune(imported, work / "hsk.tsv", work, args.fit_option)
    after = {name: bleu(tuned, test, args.beam_size) for name, test in sets.items()}
    nll_after = {name: reference_nll(tuned, test) for name, test in sets.items()}
    print(f"\nimported model translates exactly as the original: {same}")
    print(
        f"fine-tuning: {minutes:.1f} min ({' '.join(args.fit_option) or 'configs/finetune.yaml'})"
    )
    print("| test set | sentences | BLEU before | BLEU after | change | NLL/token before | after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, test in sets.items():
        b, a = before[name][0], after[name][0]
        print(
            f"| {name} | {len(test[0])} | {b:.2f} | {a:.2f} | {a - b:+.2f} | "
            f"{nll_before[name]:.3f} | {nll_after[name]:.3f} |"
        )
