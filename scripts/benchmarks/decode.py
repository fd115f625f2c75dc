"""Time per incremental decoding step at several target lengths, and parameter counts.

With the KV cache a step costs the same at position 8 as at 128 (attention over the cache is a
small part of the step), whereas recomputing the prefix grows with the length. The script prints
both, for one model size, on the current device:

    python scripts/bench.py decode                    # the demo model (d256, 3+3 layers)
    python scripts/bench.py decode --preset base      # the paper's base model
    python scripts/bench.py decode --params-only      # parameter counts of base and big
"""

from __future__ import annotations

import argparse
import time

import torch

from seq2seq import ModelConfig, Transformer
from seq2seq.config import paper_parameter_count
from seq2seq.inference.packed import pack_for_cpu_inference

PRESETS = {
    "tiny": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048),
    "big": dict(d_model=1024, n_heads=16, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096),
}


def build(preset: str, vocab_size: int) -> Transformer:
    config = ModelConfig(vocab_size=vocab_size, max_positions=512, **PRESETS[preset])
    return Transformer(config).eval()


@torch.inference_mode()
def time_steps(model: Transformer, batch: int, src_len: int, lengths: list[int], use_cache: bool):
    """Seconds per decoding step at each position in ``lengths`` (median of 3 runs)."""
    src = torch.randint(4, model.config.vocab_size, (batch, src_len))
    memory = model.encode(src)
    mask = src != model.config.pad_id
    horizon = max(lengths) + 1
    tokens = torch.randint(4, model.config.vocab_size, (batch, horizon))
    result = {}
    for _ in range(3):
        cache = model.init_cache(batch, horizon, memory, mask) if use_cache else None
        for t in range(horizon):
            start = time.perf_counter()
            if use_cache:
                model.decode(tokens[:, t : t + 1], cache=cache)
            else:
                model.decode(tokens[:, : t + 1], memory, mask)
            elapsed = time.perf_counter() - start
            if t + 1 in lengths:
                result.setdefault(t + 1, []).append(elapsed)
    return {length: sorted(times)[1] for length, times in result.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=64, help="sentences decoded together")
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--params-only", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    for preset in ("base", "big"):
        model = build(preset, 37000)
        count, formula = model.num_parameters(), paper_parameter_count(model.config)
        print(f"{preset}: {count / 1e6:.1f}M parameters with a 37k vocabulary (formula {formula})")
    if args.params_only:
        return

    model = pack_for_cpu_inference(build(args.preset, args.vocab_size))  # as Translator decodes
    print(
        f"\n{args.preset} model, vocab {args.vocab_size}, batch {args.batch}, "
        f"{torch.get_num_threads()} threads: milliseconds per decoding step"
    )
    cached = time_steps(model, args.batch, args.src_len, args.lengths, use_cache=True)
    full = time_steps(model, args.batch, args.src_len, args.lengths, use_cache=False)
    print(f"{'target position':>16} {'KV cache':>10} {'recompute':>10}")
    for length in args.lengths:
        print(f"{length:>16} {cached[length] * 1e3:>10.2f} {full[length] * 1e3:>10.2f}")
