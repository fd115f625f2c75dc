"""Input representation (paper §3.4, §3.5): one scaled, shared embedding plus positions.

Positions are the paper's fixed sinusoids by default; ``ModelConfig.positions`` can pick a
learned table (GPT-2) or rotary positions (RoFormer, Llama), which rotate attention queries
and keys instead of being added to the input.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SharedEmbedding(nn.Module):
    """The ONE token embedding matrix of the model.

    It embeds source and target tokens (multiplied by sqrt(d_model), §3.4) and, transposed,
    is the pre-softmax projection: ``project`` uses this very ``weight``, plus an optional bias
    per vocabulary entry (``output_bias``: Marian's ``final_logits_bias``; none in the paper).
    """

    def __init__(
        self, vocab_size: int, d_model: int, pad_id: int, output_bias: bool = False
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if output_bias else None
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # std d^-0.5 so that after the sqrt(d) scale token vectors have unit-size entries,
        # like the sinusoids they are added to (the fairseq / tensor2tensor convention).
        nn.init.normal_(self.weight, mean=0.0, std=self.weight.shape[1] ** -0.5)
        with torch.no_grad():
            self.weight[self.pad_id].zero_()

    def _adopt(self, embedding: SharedEmbedding) -> None:
        """Become ``embedding`` for inference: its attributes and its very Parameters (the tie
        included). What the packed and int8 subclasses call instead of ``__init__``, which
        would make and initialise a new matrix."""
        nn.Module.__init__(self)
        for name, value in vars(embedding).items():
            if not name.startswith("_") and name != "training":
                setattr(self, name, value)
        self.weight, self.bias = embedding.weight, embedding.bias
        self.training = False

    def forward(self, token_ids: Tensor) -> Tensor:
        """(B, T) long -> (B, T, d_model), scaled by sqrt(d_model)."""
        return F.embedding(token_ids, self.weight, padding_idx=self.pad_id) * self.scale

    def project(self, hidden: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, vocab) logits through the tied weight."""
        return F.linear(hidden, self.weight, self.bias)

    def narrowed(self, columns: Tensor) -> Callable[[Tensor], Tensor]:
        """``project`` onto the vocabulary entries ``columns`` (U,) alone: (..., d_model) ->
        (..., U), their rows of the weight gathered once (a shortlist's batch)."""
        weight = self.weight[columns]
        bias = None if self.bias is None else self.bias[columns]
        return lambda hidden: F.linear(hidden, weight, bias)


def sinusoid_table(n_positions: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), interleaved (§3.5).

    Returns:
        (n_positions, d_model) float32 table.
    """
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )  # (d/2,)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table.float()


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal position encodings, looked up from a precomputed table."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__()
        # Not a parameter and not saved: it is a pure function of the config.
        self.register_buffer("table", sinusoid_table(max_positions, d_model), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """Position ids (T,) or (B, T) -> encodings (T, d_model) or (B, T, d_model)."""
        return self.table[positions]


class LearnedPositions(nn.Module):
    """A trained table of absolute position vectors (GPT-2's ``wpe``)."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        # GPT-2's 0.02; the tokens they are added to have unit-size entries (sqrt(d) scale).
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: Tensor) -> Tensor:
        """Position ids (T,) or (B, T) -> vectors (T, d_model) or (B, T, d_model)."""
        return self.weight[positions]


class RotaryPositions(nn.Module):
    """Rotary position embedding (Su et al. 2021): cos/sin of position x frequency.

    Dimension pair (i, i + Dh/2) of a query or key at position m is rotated by the angle
    m * theta^(-2i/Dh). A rotation by m then by -n leaves a rotation by m - n, so the dot product
    of a rotated query and key depends on their positions only through m - n.
    """

    def __init__(self, max_positions: int, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq  # (P, Dh/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Position ids (T,) or (B, T) -> (cos, sin), each (T, Dh/2) or (B, 1, T, Dh/2): ready
        to broadcast over (B, H, T, Dh/2) halves of queries and keys."""
        cos, sin = self.cos[positions], self.sin[positions]
        if positions.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]
        return cos, sin
