"""Faster CPU inference: a trained model's linear weights packed once, for good.

For float32 on the CPU, ``F.linear`` calls MKL's sgemm, which lays the weight out in its
blocked format again on every call. A decoding step multiplies only a few dozen rows by each
matrix, so that repacking is a large share of the step. oneDNN (bundled with PyTorch) can
multiply by a copy packed once: at 64-320 rows with d_model 256 it ran 1.3-2x faster here
(the tied 8000 x 256 output projection 2x).

``pack_for_cpu_inference(model)`` is an explicit, one-way step taken after loading a model for
inference (``Translator``, ``Generator``, the server, the benchmarks), through the one entry
point ``prepare_for_inference(model, quantize)``, which picks it or int8
(``seq2seq.quantization``) once, at load. It freezes the parameters and swaps
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

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor, nn

from seq2seq.embedding import SharedEmbedding

_MKLDNN_OPS = getattr(torch.ops, "mkldnn", None)
PACKING_AVAILABLE = (
    torch.backends.mkldnn.is_available()
    and hasattr(_MKLDNN_OPS, "_reorder_linear_weight")
    and hasattr(_MKLDNN_OPS, "_linear_pointwise")
)

Model = TypeVar("Model", bound=nn.Module)
QUANTIZE_CHOICES = ("int8",)


def prepare_for_inference(model: Model, quantize: str | None = None) -> Model:
    """The one step that readies a loaded model for decoding, chosen once at load: float32
    weights packed for oneDNN (``pack_for_cpu_inference``), or with ``quantize="int8"`` the
    linear layers and the tied output projection in int8 (``seq2seq.quantization``; CPU
    only, a one-line ValueError elsewhere). Either way in place, inference only."""
    if quantize is None:
        return pack_for_cpu_inference(model)
    check_quantize(quantize, "cpu")
    from seq2seq.quantization import quantize_for_cpu_inference

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


def pack_for_cpu_inference(model: Model) -> Model:
    """Freeze ``model`` (eval mode, no gradients) and swap in packed linear layers, in place.

    A no-op when oneDNN packing is not available or a parameter is not on the CPU in float32
    (GPUs, half precision): those take ``F.linear`` as it is. Packing a packed model again
    changes nothing. Returns ``model``.
    """
    if not PACKING_AVAILABLE or not all(is_cpu_float32(p) for p in model.parameters()):
        return model
    return freeze_and_swap(model, PackedLinear, PackedEmbedding)


def freeze_and_swap(
    model: Model,
    linear: Callable[[nn.Linear], nn.Module],
    embedding: Callable[[SharedEmbedding], nn.Module],
) -> Model:
    """Eval mode, no gradients, and every ``nn.Linear`` / ``SharedEmbedding`` replaced by
    ``linear(it)`` / ``embedding(it)``, in place: the inference step packing and int8 share."""
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            # Exact types: a subclass may use its weight in its own way.
            if type(child) is nn.Linear:
                setattr(parent, name, linear(child))
            elif type(child) is SharedEmbedding:
                setattr(parent, name, embedding(child))
    return model


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


class _Packed(nn.Module):
    """What packed modules share: ``weight`` (the original, frozen Parameter) and ``packed``
    (its packed copy: a plain attribute, so never in a state dict), inference only."""

    weight: nn.Parameter
    packed: Tensor

    def train(self, mode: bool = True) -> _Packed:
        if mode:
            raise RuntimeError(
                "a model packed for CPU inference cannot be trained: train the unpacked model"
            )
        return super().train(False)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> _Packed:
        # .to(), .float(), .cpu(), ... may give the weight new data: pack it again.
        super()._apply(fn, recurse)
        self.packed = pack_weight(self.weight)
        return self

    def _load_from_state_dict(
        self, state_dict: dict[str, Tensor], prefix: str, *args, **kwargs
    ) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.packed = pack_weight(self.weight)

    # The packed copy is an opaque oneDNN tensor that cannot be pickled or deep-copied:
    # copies and pickles pack their own weight again.
    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "packed"}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.packed = pack_weight(self.weight)


class PackedLinear(_Packed):
    """The ``nn.Linear`` of a packed model: x W^T + b by oneDNN with W packed once.

    It holds the replaced layer's own ``weight`` and ``bias`` Parameters (same state dict).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.packed = pack_weight(self.weight)
        self.training = False

    def forward(self, x: Tensor) -> Tensor:
        """(..., in_features) -> (..., out_features)."""
        return packed_linear(x, self.packed, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed"


class PackedEmbedding(_Packed, SharedEmbedding):
    """The ``SharedEmbedding`` of a packed model: the same lookup, and the tied output
    projection through a packed copy of the same weight."""

    def __init__(self, embedding: SharedEmbedding) -> None:
        self._adopt(embedding)  # its weight Parameter: the tie
        self.packed = pack_weight(self.weight)

    def project(self, hidden: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, vocab) logits through the tied weight, packed."""
        return packed_linear(hidden, self.packed, self.bias)
