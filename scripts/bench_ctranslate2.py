"""Our PyTorch decoding against CTranslate2 exports of the same checkpoint, on its test split.

    seq2seq export --checkpoint CKPT --format ctranslate2 --output exports/ct2
    seq2seq export --checkpoint CKPT --format ctranslate2 --quantization int8 \
        --output exports/ct2-int8
    python scripts/bench_ctranslate2.py --checkpoint CKPT --ct2 exports/ct2 exports/ct2-int8

Prints seconds, sentences/s and sacreBLEU for greedy and beam 5 (2 threads each, after a short
warm-up), and how many outputs are identical to ours.
"""

from __future__ import annotations

import argparse
import time

import torch

from seq2seq.evaluation import held_out_split, reference_streams, score_translations
from seq2seq.translator import Translator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the .ckpt that was exported")
    parser.add_argument("--ct2", nargs="+", required=True, help="CTranslate2 export directories")
    parser.add_argument("--split", default="test", choices=("test", "dev"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    sources, references = held_out_split(args.checkpoint, args.split)
    streams = reference_streams(references)  # one item per distinct English sentence
    engines = {"ours (PyTorch)": Translator.from_checkpoint(args.checkpoint)}
    engines.update({f"CTranslate2 {path}": Translator.from_ctranslate2(path) for path in args.ct2})
    outputs: dict[tuple[str, int], tuple[float, list[str]]] = {}
    for name, translator in engines.items():
        for beam in (1, 5):
            translator.translate(sources[:50], beam_size=beam)  # warm-up
            start = time.perf_counter()
            hypotheses = translator.translate(sources, beam_size=beam)
            seconds = time.perf_counter() - start
            outputs[name, beam] = (seconds, hypotheses)
            bleu = score_translations(hypotheses, streams)["bleu"]
            print(f"{name:40s} beam {beam}: {seconds:6.2f} s {len(sources) / seconds:7.1f} "
                  f"sent/s  BLEU {bleu:.2f}", flush=True)  # fmt: skip
    for name in list(engines)[1:]:
        for beam in (1, 5):
            ours_seconds, ours = outputs["ours (PyTorch)", beam]
            seconds, theirs = outputs[name, beam]
            same = sum(a == b for a, b in zip(ours, theirs, strict=True))
            print(f"{name} beam {beam}: {ours_seconds / seconds:.2f}x our speed, "
                  f"{same}/{len(sources)} outputs identical to ours")  # fmt: skip


if __name__ == "__main__":
    main()
