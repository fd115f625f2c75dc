"""What packed and int8 layers share: a trained weight frozen, with a copy made for fast
multiplication, swapped into a model in place, for inference only.

``freeze_and_swap`` is the one step both take (``seq2seq.inference.packed`` packs float32
weights for oneDNN, ``seq2seq.inference.int8`` quantizes them). The layers it swaps in keep the
replaced layers' very ``Parameter`` objects, so the state dict keeps its names and values, and
the derived copy (``packed``, a plain attribute) is never saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from torch import Tensor, nn

from seq2seq.embedding import SharedEmbedding

Model = TypeVar("Model", bound=nn.Module)


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


class FrozenWeight(nn.Module):
    """A frozen ``weight`` (the original Parameter) and ``packed``, a copy derived from it by
    ``derive`` for ``multiply``; inference only. Subclasses say how to derive and multiply."""

    weight: nn.Parameter
    bias: nn.Parameter | None
    packed: Any
    refusal = "a frozen model cannot be trained"  # what train() says

    def derive(self) -> None:
        """Make ``self.packed`` from ``self.weight`` (again)."""
        raise NotImplementedError

    def multiply(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out): x W^T + b, through ``self.packed``."""
        raise NotImplementedError

    def train(self, mode: bool = True) -> FrozenWeight:
        if mode:
            raise RuntimeError(self.refusal)
        return super().train(False)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> FrozenWeight:
        # .to(), .float(), .cpu(), ... may give the weight new data (or refuse it): derive again.
        super()._apply(fn, recurse)
        self.derive()
        return self

    def _load_from_state_dict(
        self, state_dict: dict[str, Tensor], prefix: str, *args, **kwargs
    ) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.derive()

    # The derived copy is an opaque kernel object that may not pickle or deep-copy: copies and
    # pickles derive their own again.
    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "packed"}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.derive()


class FrozenLinear(FrozenWeight):
    """An ``nn.Linear`` of a frozen model; it holds the replaced layer's own ``weight`` and
    ``bias`` Parameters (same state dict)."""

    kind = "frozen"  # extra_repr's last word

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.derive()
        self.training = False

    def forward(self, x: Tensor) -> Tensor:
        """(..., in_features) -> (..., out_features)."""
        return self.multiply(x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.kind}"


class FrozenEmbedding(FrozenWeight, SharedEmbedding):
    """The ``SharedEmbedding`` of a frozen model: the same lookup, and the tied output
    projection through the derived copy of the same weight."""

    def __init__(self, embedding: SharedEmbedding) -> None:
        self._adopt(embedding)  # its weight Parameter: the tie
        self.derive()

    def project(self, hidden: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, vocab) logits through the tied weight."""
        return self.multiply(hidden)

    def narrowed(self, columns: Tensor) -> Callable[[Tensor], Tensor]:
        """``project`` onto the vocabulary entries ``columns`` (U,) alone, through a copy
        derived once from their rows (packed or int8 as the whole one; int8's scales are per
        row, so each entry's product is the same as in the whole projection)."""
        part = type(self).__new__(type(self))
        nn.Module.__init__(part)
        part.weight = self.weight[columns]
        part.bias = None if self.bias is None else self.bias[columns]
        part.derive()
        return part.multiply
