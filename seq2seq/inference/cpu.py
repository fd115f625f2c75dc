"""Readying a loaded model for decoding, in one step chosen once at load: float32 weights
packed for oneDNN (``seq2seq.inference.packed``), or int8 (``seq2seq.inference.int8``).

``Translator``, ``Generator``, the server and the benchmarks call ``prepare_for_inference``
after loading; the model code and training never see a packed or quantized layer.
"""

from __future__ import annotations

import torch

from seq2seq.inference.frozen import Model
from seq2seq.inference.int8 import quantize_for_cpu_inference
from seq2seq.inference.packed import pack_for_cpu_inference

QUANTIZE_CHOICES = ("int8",)


def prepare_for_inference(model: Model, quantize: str | None = None) -> Model:
    """The one step that readies a loaded model for decoding, chosen once at load: float32
    weights packed for oneDNN (``pack_for_cpu_inference``), or with ``quantize="int8"`` the
    linear layers and the tied output projection in int8 (``quantize_for_cpu_inference``; CPU
    only, a one-line ValueError elsewhere). Either way in place, inference only."""
    if quantize is None:
        return pack_for_cpu_inference(model)
    check_quantize(quantize, "cpu")
    return quantize_for_cpu_inference(model)


def check_quantize(quantize: str | None, device: str) -> None:
    """Refuse, before anything is loaded, a quantization that is unknown or that the device
    cannot run (a one-line ValueError)."""
    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise ValueError(f"unknown quantization {quantize!r}: choose one of {QUANTIZE_CHOICES}")
    if quantize is not None and torch.device(device).type != "cpu":
        raise ValueError(
            f"--quantize {quantize} runs on the CPU only, not on --device {device} "
            "(on a GPU, decode in float32)"
        )
