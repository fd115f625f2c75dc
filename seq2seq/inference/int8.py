"""int8 CPU inference: the linear layers and the tied output projection in 8-bit integers.

``quantize_for_cpu_inference(model)`` is the int8 counterpart of
``seq2seq.inference.packed.pack_for_cpu_inference`` and is chosen instead of it, once, at load
(``seq2seq.inference.cpu.prepare_for_inference``). Checkpoints stay float32: the weights are
quantized when a model is loaded, in well under a second for the demo model.

The scheme is CTranslate2's:
- **weights**: int8, one scale per output channel (row of W), symmetric: ``W ~ s_c * Wq``;
- **activations**: quantized at run time with one scale per ROW (token), so a sentence's
  output never depends on the other sentences of its batch;
- the embedding lookup stays float32; the tied output projection multiplies by an int8 copy
  of the same matrix.

The multiplication is PyTorch's own fbgemm kernel (``quantized::linear_dynamic``, what
``torch.ao.quantization.quantize_dynamic`` uses): int8 weights prepacked once, activations
quantized per TENSOR inside the kernel, 7-bit ("reduce_range", so that AVX2's 16-bit
pairwise sums cannot saturate on CPUs without VNNI). Per-row scales on top of that kernel:
every row is divided by its largest magnitude, and two rows of +1 and -1 are appended, so the
tensor's range is exactly [-1, 1] whatever the batch holds; the product is multiplied back by
each row's magnitude. That costs three small elementwise passes per layer; a per-tensor scale
would save them (it measured 1.2x faster here), but would let one sentence's outlier coarsen
its neighbours' quantization, and their translations change with the batch.

A quantized model is for inference only, like a packed one: ``train()`` raises.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from seq2seq.inference.frozen import FrozenEmbedding, FrozenLinear, FrozenWeight, freeze_and_swap

QUANTIZATION_AVAILABLE = (
    "fbgemm" in torch.backends.quantized.supported_engines
    and hasattr(torch.ops.quantized, "linear_dynamic")
    and hasattr(torch.ops.quantized, "linear_prepack")
)
# fbgemm quantizes activations to 7 bits on x86 (see the module docstring).
REDUCE_RANGE = True


def check_quantizable(model: nn.Module) -> None:
    """Raise a one-line ValueError unless ``model`` can run in int8 here: CPU float32
    parameters and PyTorch's fbgemm kernels (x86 CPUs)."""
    if not QUANTIZATION_AVAILABLE:
        raise ValueError(
            "--quantize int8 needs PyTorch's fbgemm int8 kernels (x86 CPUs), which this "
            f"torch {torch.__version__} lacks"
        )
    for parameter in model.parameters():
        if parameter.device.type != "cpu":
            raise ValueError(
                f"--quantize int8 runs on the CPU only; this model is on {parameter.device} "
                "(on a GPU, decode in float32 or bfloat16)"
            )
        if parameter.dtype != torch.float32:
            raise ValueError(f"--quantize int8 quantizes float32 weights, got {parameter.dtype}")


def quantize_for_cpu_inference(model: nn.Module) -> nn.Module:
    """Freeze ``model`` and swap every ``nn.Linear`` for an ``Int8Linear`` and the shared
    embedding for an ``Int8Embedding``, in place; returns ``model``. The swapped-in modules
    keep the very same Parameters (float32), so the state dict is unchanged."""
    check_quantizable(model)
    return freeze_and_swap(model, Int8Linear, Int8Embedding)


def quantize_weight(weight: Tensor) -> torch.ScriptObject:
    """(out, in) float32 weight -> fbgemm's prepacked int8 weight, one scale per output row
    (its largest magnitude / 127; an all-zero row gets a tiny scale and stays zero)."""
    weight = weight.detach().float()
    scales = weight.abs().amax(dim=1).clamp_min(1e-12).double() / 127.0
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        # torch 2.10+ calls quantized tensors deprecated; fbgemm's prepack still takes one.
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions")
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None)


def int8_linear(x: Tensor, packed: torch.ScriptObject, bias: Tensor | None, pin: Tensor) -> Tensor:
    """(..., in) -> (..., out): x W^T + b with W int8 (``quantize_weight``) and x quantized
    with one scale per row. ``pin`` is (2, in): a row of +1s and a row of -1s."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1])  # (M, in)
    magnitude = rows.abs().amax(dim=1, keepdim=True).clamp_min_(1e-30)  # (M, 1)
    # Every row now spans at most [-1, 1], and the pin rows make the tensor's range exactly
    # that: the kernel's one activation scale is then the same for every batch.
    normalised = torch.cat((rows / magnitude, pin))  # (M + 2, in)
    out = torch.ops.quantized.linear_dynamic(normalised, packed, REDUCE_RANGE)[:-2]  # (M, out)
    out = out.mul_(magnitude) if bias is None else torch.addcmul(bias, out, magnitude, out=out)
    return out.view(*shape[:-1], out.shape[-1])


def pin_rows(width: int) -> Tensor:
    """(2, width): the rows of +1 and -1 that fix the activation range (``int8_linear``)."""
    return torch.stack((torch.ones(width), -torch.ones(width)))


class Int8Weight(FrozenWeight):
    """A frozen float32 weight multiplied through its int8 copy (per-channel scales), with
    activations quantized per row."""

    refusal = "a model quantized for CPU inference cannot be trained: train the float model"
    kind = "int8"

    def derive(self) -> None:
        check_quantizable(self)
        for parameter in self.parameters():  # inference only: frozen, like the whole model
            parameter.requires_grad_(False)
        self.packed = quantize_weight(self.weight)
        self.pin = pin_rows(self.weight.shape[1])

    def multiply(self, x: Tensor) -> Tensor:
        return int8_linear(x, self.packed, self.bias, self.pin)


class Int8Linear(Int8Weight, FrozenLinear):
    """The ``nn.Linear`` of an int8 model: x W^T + b with W in int8 and x quantized per row."""


class Int8Embedding(Int8Weight, FrozenEmbedding):
    """The ``SharedEmbedding`` of an int8 model: the same float32 lookup, and the tied output
    projection through an int8 copy of the same weight."""
