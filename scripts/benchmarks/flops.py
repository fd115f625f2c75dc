"""Model FLOPs, counted from each sentence's real (non-pad) lengths, and what they are divided
by for MFU: this machine's measured fp32 matmul rate, or a GPU's dense bf16 peak.

Per layer, for a sentence of S source and T target tokens (eos included), d = d_model,
f = d_ff, V = vocabulary:

    encoder  S (8 d^2 + 4 d f) + 4 S^2 d
    decoder  T (12 d^2 + 4 d f) + 4 S d^2 + 4 d T (T + 1) / 2 + 4 T S d
    output   2 T d V

The decoder's 4 S d^2 projects the memory into cross-attention keys/values; causal
self-attention counts only the visible pairs. Training is 3 x forward (the backward pass is
twice the forward). Padding, softmax, LayerNorm and the optimizer are not counted: both models
get credit for the same useful work only.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

# Dense bf16 tensor-core peaks (TFLOP/s), first matching substring of the device name wins.
PEAK_BF16_TFLOPS = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
]


def forward_flops(src_lens: list[int], tgt_lens: list[int], mc: dict[str, Any]) -> int:
    """Forward matmul FLOPs of a batch from real lengths (the formula above); ``mc`` is a
    ``ModelConfig`` as a dict."""
    d, f, vocab = mc["d_model"], mc["d_ff"], mc["vocab_size"]
    total = 0
    for s, t in zip(src_lens, tgt_lens, strict=True):
        encoder = s * (8 * d * d + 4 * d * f) + 4 * s * s * d
        decoder = t * (12 * d * d + 4 * d * f) + 4 * s * d * d + 2 * d * t * (t + 1) + 4 * t * s * d
        total += mc["n_encoder_layers"] * encoder + mc["n_decoder_layers"] * decoder
        total += 2 * t * d * vocab
    return total


def train_flops(batch: dict[str, Any], mc: dict[str, Any]) -> int:
    """Forward + backward FLOPs of one training batch (a ``Batch`` as a dict): 3 x forward."""
    src_lens = (batch["src"] != mc["pad_id"]).sum(dim=1).tolist()
    tgt_lens = (batch["tgt_out"] != mc["pad_id"]).sum(dim=1).tolist()
    return 3 * forward_flops(src_lens, tgt_lens, mc)


def n_tokens(batch: dict[str, Any]) -> int:
    """Non-pad source + target tokens of a batch (a ``Batch`` as a dict)."""
    return int(batch["n_src_tokens"]) + int(batch["n_tgt_tokens"])


def peak_bf16_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU by ``torch.cuda.get_device_name()``; None if unknown."""
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in device_name:
            return tflops * 1e12
    return None


def matmul_rate(n: int) -> dict[str, Any]:
    """fp32 ``torch.mm`` rate with the current threads: best and median of repeated n x n
    products (2 n^3 FLOPs each), after 2 untimed ones; at least 5 and at most 50, ~3 s."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        torch.mm(a, b)
    times: list[float] = []
    deadline = time.perf_counter() + 3.0
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 50):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    flops = 2 * n**3
    return {
        "size": n,
        "repeats": len(times),
        "best_flops_per_s": flops / min(times),
        "median_flops_per_s": flops / statistics.median(times),
    }
