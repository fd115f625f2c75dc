"""y = x W^T + b, with one speed-up for inference on the CPU: a weight packed once.

For float32 on the CPU, ``F.linear`` calls MKL's sgemm, which lays the weight out in its
blocked format again on every call. A decoding step multiplies only a few dozen rows by each
matrix, so that repacking is a large share of the step. oneDNN (bundled with PyTorch) can
multiply by a copy packed once: at 64-320 rows with d_model 256 it ran 1.3-2x faster here
(the tied 8000 x 256 output projection 2x). The packed copy is used only where no gradient
is wanted (``torch.no_grad`` / ``torch.inference_mode``), on the CPU in float32; training,
GPUs and other dtypes take ``F.linear`` unchanged. The copy is remade whenever the weight
changes (an optimizer step, ``load_state_dict``), so validation during training stays exact.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_MKLDNN_OPS = getattr(torch.ops, "mkldnn", None)
PACKING_AVAILABLE = (
    torch.backends.mkldnn.is_available()
    and hasattr(_MKLDNN_OPS, "_reorder_linear_weight")
    and hasattr(_MKLDNN_OPS, "_linear_pointwise")
)


class PackedWeight:
    """A oneDNN-packed copy of one weight matrix, remade when the weight is modified.

    The weight is recognised by identity (a weak reference), by its version counter, which
    every in-place update (optimizer step, ``copy_`` from a state dict) increments, and by its
    storage: ``module.to(...)``/``.double()`` swap ``weight.data`` without a new version. The
    packed copy keeps the storage it was made from alive, so no later storage can take its
    address and pass for it. Writes that bump no version (through ``weight.data``, or a fused
    optimizer step) are caught by ``clear``, which ``model.train()``/``model.eval()`` call: a
    validation run after training steps always starts from fresh copies.
    """

    def __init__(self) -> None:
        self._source: weakref.ref | None = None
        self._source_data: Tensor | None = None
        self._version = -1
        self._packed: Tensor | None = None

    def get(self, weight: Tensor) -> Tensor:
        """The packed copy of ``weight`` (out_features, in_features), packing it if needed."""
        source = self._source() if self._source is not None else None
        fresh = (
            source is weight
            and self._packed is not None
            and self._version == weight._version
            and self._source_data is not None
            and self._source_data.data_ptr() == weight.data_ptr()
        )
        if not fresh:
            data = weight.detach()
            self._packed = torch.ops.mkldnn._reorder_linear_weight(data)
            self._source, self._source_data = weakref.ref(weight), data
            self._version = weight._version
        return self._packed

    def clear(self) -> None:
        """Drop the packed copy; the next ``get`` packs the weight again."""
        self.__init__()

    # A packed copy is a cache: copies and pickles of a module start without one.
    def __deepcopy__(self, memo: dict) -> PackedWeight:
        return PackedWeight()

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()


def uses_packed_weight(x: Tensor, weight: Tensor) -> bool:
    """Whether ``linear`` multiplies by the packed copy: CPU float32 inference, eager
    (``torch.compile`` packs weights its own way)."""
    return (
        PACKING_AVAILABLE
        and not torch.is_grad_enabled()
        and not torch.compiler.is_compiling()
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and not _cpu_autocast()
    )


try:  # torch >= 2.4 takes a device type; decided once, not on every call of a hot path
    torch.is_autocast_enabled("cpu")

    def _cpu_autocast() -> bool:
        """Whether CPU autocast is on (F.linear would then run in its lower precision)."""
        return torch.is_autocast_enabled("cpu")

except TypeError:
    _cpu_autocast = torch.is_autocast_cpu_enabled


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, packed: PackedWeight) -> Tensor:
    """(..., in) -> (..., out): ``F.linear``, or oneDNN with ``packed`` at CPU inference."""
    if uses_packed_weight(x, weight):
        return torch.ops.mkldnn._linear_pointwise(x, packed.get(weight), bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) that multiplies by a packed copy of
    its weight at CPU inference (see the module docstring)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.packed_weight = PackedWeight()

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias, self.packed_weight)

    def train(self, mode: bool = True) -> Linear:
        self.packed_weight.clear()  # see PackedWeight: writes that bump no version
        return super().train(mode)
