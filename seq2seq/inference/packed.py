"""Faster CPU inference: a trained model's linear weights packed once, for good.

For float32 on the CPU, ``F.linear`` calls MKL's sgemm, which lays the weight out in its
blocked format again on every call. A decoding step multiplies only a few dozen rows by each
matrix, so that repacking is a large share of the step. oneDNN (bundled with PyTorch) can
multiply by a copy packed once: at 64-320 rows with d_model 256 it ran 1.3-2x faster here
(the tied 8000 x 256 output projection 2x).

``pack_for_cpu_inference(model)`` is an explicit, one-way step taken after loading a model for
inference (``Translator``, ``Generator``, the server, the benchmarks), through the one entry
point ``seq2seq.inference.cpu.prepare_for_inference(model, quantize)``, which picks it or int8
(``seq2seq.inference.int8``) once, at load. It freezes the parameters and swaps
every ``nn.Linear`` for a ``PackedLinear``, and the shared embedding for a ``PackedEmbedding``
whose tied output projection multiplies by a packed copy. The model code and training never
see a packed copy: they use ``nn.Linear`` / ``F.linear``. The swapped-in modules keep the very
same ``Parameter`` objects, so the state dict keeps its names and values, and nothing packed
is ever saved.

A packed model is for inference only: ``train()`` raises. Its packed copies are made from the
weights when it is packed, and again by ``load_state_dict`` and by ``.to()``/``.float()``/...
(which raise for anything but CPU float32); in-place writes to its weights (through
``.data``, or under ``torch.no_grad``) are not seen: change the weights before packing.
"""

from __future__ import annotations

import torch
from torch import Tensor

from seq2seq.inference.frozen import (
    FrozenEmbedding,
    FrozenLinear,
    FrozenWeight,
    Model,
    freeze_and_swap,
)

_MKLDNN_OPS = getattr(torch.ops, "mkldnn", None)
PACKING_AVAILABLE = (
    torch.backends.mkldnn.is_available()
    and hasattr(_MKLDNN_OPS, "_reorder_linear_weight")
    and hasattr(_MKLDNN_OPS, "_linear_pointwise")
)


def pack_for_cpu_inference(model: Model) -> Model:
    """Freeze ``model`` (eval mode, no gradients) and swap in packed linear layers, in place.

    A no-op when oneDNN packing is not available or a parameter is not on the CPU in float32
    (GPUs, half precision): those take ``F.linear`` as it is. Packing a packed model again
    changes nothing. Returns ``model``.
    """
    if not PACKING_AVAILABLE or not all(is_cpu_float32(p) for p in model.parameters()):
        return model
    return freeze_and_swap(model, PackedLinear, PackedEmbedding)


def is_cpu_float32(tensor: Tensor) -> bool:
    """Whether oneDNN can pack (or multiply by) ``tensor``: on the CPU in float32."""
    return tensor.device.type == "cpu" and tensor.dtype == torch.float32


def pack_weight(weight: Tensor) -> Tensor:
    """(out_features, in_features) CPU float32 weight -> its oneDNN-packed copy."""
    if not is_cpu_float32(weight):
        raise ValueError(
            f"a packed model stays on the CPU in float32, got {weight.dtype} on "
            f"{weight.device}: move or convert the model before pack_for_cpu_inference"
        )
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach())


def packed_linear(x: Tensor, packed: Tensor, bias: Tensor | None) -> Tensor:
    """(..., in) -> (..., out): x W^T + b, with W given as ``pack_weight(W)``."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedWeight(FrozenWeight):
    """A frozen weight multiplied through its oneDNN-packed copy."""

    refusal = "a model packed for CPU inference cannot be trained: train the unpacked model"
    kind = "packed"

    def derive(self) -> None:
        self.packed = pack_weight(self.weight)

    def multiply(self, x: Tensor) -> Tensor:
        return packed_linear(x, self.packed, self.bias)


class PackedLinear(PackedWeight, FrozenLinear):
    """The ``nn.Linear`` of a packed model: x W^T + b by oneDNN with W packed once."""


class PackedEmbedding(PackedWeight, FrozenEmbedding):
    """The ``SharedEmbedding`` of a packed model: the same lookup, and the tied output
    projection through a packed copy of the same weight."""
