"""Our PyTorch decoding, float32 and int8, against CTranslate2's, on a checkpoint's test split.

    seq2seq export --checkpoint CKPT --format ctranslate2 --output exports/ct2
    python scripts/bench.py ctranslate2 --checkpoint CKPT --ct2 exports/ct2
    python scripts/bench.py ctranslate2 --checkpoint CKPT --ct2 exports/ct2 --base

Four engines, in one run on one machine, 2 threads each: ours float32 (oneDNN-packed weights),
ours ``--quantize int8``, CTranslate2 float32 and CTranslate2 int8 (the float32 export,
quantized as CTranslate2 loads it: the weights ``export --quantization int8`` writes). Each
engine runs in a fresh process, so that its peak memory is its own; the rounds alternate the
engines and each time is the best of ``--rounds``. Prints one table: seconds for greedy and
beam 5 over the split (after a short warm-up), sacreBLEU of beam 5, how many greedy outputs
are identical to ours in float32, and peak resident memory.

``--base`` times the paper's base shape instead (d512, 8 heads, 6+6 layers, d_ff 2048) with
random weights and the checkpoint's vocabulary, on ``--base-sentences`` test sentences at a
fixed output length of 32 (a random model almost never ends early): the shape where the
matrix products weigh more than the per-step overhead. Its BLEU means nothing and is not shown.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.harness import rss_mib, timed
from seq2seq.inference.options import TranslateOptions

ENGINES = ("ours fp32", "ours int8", "CTranslate2 fp32", "CTranslate2 int8")
BASE = dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048)


@dataclass(frozen=True)
class Job:
    engine: str
    checkpoint: str
    ct2: str
    sources: list[str]
    warmup: int = 50


def run_engine(job: Job) -> dict:
    """In a fresh process: load one engine, time greedy and beam 5 over the sources."""
    import torch

    from seq2seq.inference.translator import Translator

    torch.set_num_threads(2)
    baseline = rss_mib("VmHWM")
    quantize = "int8" if job.engine.endswith("int8") else None
    if job.engine.startswith("ours"):
        translator = Translator.from_checkpoint(job.checkpoint, quantize=quantize)
    else:
        translator = Translator.from_ctranslate2(job.ct2, quantize=quantize)
    result = {}
    for beam in (1, 5):
        translator.translate(job.sources[: job.warmup], TranslateOptions(beam_size=beam))
        options = TranslateOptions(beam_size=beam)
        result[beam], result[f"seconds {beam}"] = timed(translator.translate, job.sources, options)
    result["peak MiB"], result["imports MiB"] = rss_mib("VmHWM"), baseline
    return result


def in_fresh_process(job: Job) -> dict:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_engine, (job,))


def base_checkpoint(
    checkpoint: str, directory: Path, shape: dict[str, int] = BASE, length: int = 32
) -> tuple[str, str]:
    """A random-weight checkpoint of the paper's base shape (or ``shape``) with
    ``checkpoint``'s tokenizer, decoding exactly ``length`` tokens, and its CTranslate2
    export: (ckpt path, export dir)."""
    import torch

    from seq2seq import ModelConfig, Transformer
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.inference.checkpoint import CHECKPOINT_KEY, read_checkpoint
    from seq2seq.tools.export import export_ctranslate2

    section = dict(read_checkpoint(checkpoint)[CHECKPOINT_KEY])
    trained = ModelConfig(**section["model_config"])
    torch.manual_seed(0)
    config = ModelConfig(**{**trained.to_dict(), **shape, "max_positions": 256})
    model = Transformer(config)
    section["model_config"] = config.to_dict()
    section["search"] = asdict(SearchConfig(max_len_a=0.0, max_len_b=length))
    path = directory / "base.ckpt"
    weights = {f"model.{name}": w for name, w in model.state_dict().items()}
    torch.save({"state_dict": weights, CHECKPOINT_KEY: section}, path)
    export_ctranslate2(path, directory / "base-ct2")
    return str(path), str(directory / "base-ct2")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the .ckpt that was exported")
    parser.add_argument("--ct2", required=True, help="its float32 CTranslate2 export")
    parser.add_argument("--split", default="test", choices=("test", "dev"))
    parser.add_argument("--rounds", type=int, default=2, help="best of this many runs (2)")
    parser.add_argument("--base", action="store_true", help="the paper's base shape instead")
    parser.add_argument("--base-sentences", type=int, default=200, help="with --base (200)")
    args = parser.parse_args(argv)

    from seq2seq.inference.evaluation import held_out_split, reference_streams, score_translations

    sources, references = held_out_split(args.checkpoint, args.split)
    streams = reference_streams(references)  # one item per distinct English sentence
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint, ct2 = args.checkpoint, args.ct2
        if args.base:
            checkpoint, ct2 = base_checkpoint(args.checkpoint, Path(tmp))
            sources = sources[: args.base_sentences]
        best: dict[str, dict] = {}
        for round_ in range(args.rounds):
            for engine in ENGINES:
                result = in_fresh_process(Job(engine, checkpoint, ct2, sources))
                print(
                    f"round {round_ + 1} {engine:17s} greedy {result['seconds 1']:6.2f} s  "
                    f"beam 5 {result['seconds 5']:6.2f} s",
                    flush=True,
                )
                kept = best.setdefault(engine, result)
                for beam in (1, 5):
                    key = f"seconds {beam}"
                    kept[key] = min(kept[key], result[key])
    reference = best["ours fp32"][1]
    shape = "paper base shape, random weights" if args.base else Path(args.checkpoint).name
    print(f"\n{len(sources)} sentences ({shape}), 2 threads, best of {args.rounds}:\n")
    print("| engine | greedy s | beam 5 s | BLEU beam 5 | identical to fp32 greedy | peak MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for engine, result in best.items():
        bleu = "-" if args.base else f"{score_translations(result[5], streams)['bleu']:.2f}"
        same = sum(a == b for a, b in zip(result[1], reference, strict=True))
        print(
            f"| {engine} | {result['seconds 1']:.2f} | {result['seconds 5']:.2f} | {bleu} | "
            f"{same}/{len(sources)} | {result['peak MiB']:.0f} |"
        )
    ct2 = best["CTranslate2 fp32"]
    print("\nspeed relative to CTranslate2 fp32 (>1 = faster):")
    for engine, result in best.items():
        ratios = [ct2[f"seconds {b}"] / result[f"seconds {b}"] for b in (1, 5)]
        print(f"  {engine:17s} greedy {ratios[0]:.2f}x  beam 5 {ratios[1]:.2f}x")
    print(f"(peak MiB includes the {best['ours fp32']['imports MiB']:.0f} MiB of Python + torch)")
