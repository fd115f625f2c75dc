"""How far to trust a translation: a confidence in [0, 1] per sentence, from the search alone.

The signals are what the beam search already has for its best hypothesis, so computing them
costs nothing but a few floats: the mean log-probability of its tokens (eos included), the
source's length in pieces and the output's length against it (both as logs). On the demo
model's test split, of the signals tried (the least likely token, the share of unlikely
tokens, the n-best's agreement and margin, words training never saw, pieces per word, loops),
none added to these three (docs/translating.md#confidence has the figures).

A checkpoint calibrated by ``seq2seq calibrate`` (its dev split translated, each sentence's
chrF against its reference) holds a :class:`Calibration`: a linear score of the standardised
signals, fitted by least squares to the chrF, then mapped to [0, 1] by isotonic regression
(pool-adjacent-violators) onto chrF / 100. So a confidence of 0.3 means: sentences with it had,
on the dev split, a chrF of 30 on average. A checkpoint without one gets ``exp(mean
log-probability)``, the geometric mean of its tokens' probabilities: a ranking, not calibrated
(``Calibration.calibrated`` says which).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

FEATURES = ("mean_log_prob", "log_source_length", "log_length_ratio")


class Translation(NamedTuple):
    """A text's translation and its confidence in [0, 1] (None: nothing was translated)."""

    text: str
    confidence: float | None


def signals(log_prob: float, steps: int, source_tokens: int) -> list[float]:
    """The :data:`FEATURES` of one hypothesis: its log-probability over its ``steps`` (tokens
    and eos: the log-probability holds the eos's), and its source's token count."""
    steps, source = max(1, steps), max(1, source_tokens)
    return [log_prob / steps, math.log(source), math.log(steps / source)]


@dataclass(frozen=True)
class Calibration:
    """Signals -> confidence. ``mean``/``scale`` standardise the signals, ``weights``/``bias``
    give the linear score, ``knots_x``/``knots_y`` the isotonic map of that score to [0, 1]
    (linear between knots, flat beyond). ``fitted_on``: what it was fitted on, in words."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    knots_x: tuple[float, ...]
    knots_y: tuple[float, ...]
    fitted_on: str = ""

    @property
    def calibrated(self) -> bool:
        return bool(self.knots_x)

    def __call__(self, values: Sequence[float]) -> float:
        """The confidence of one sentence's signals (:func:`signals`)."""
        if not self.calibrated:  # the uncalibrated ranking: the tokens' geometric mean
            return float(min(1.0, math.exp(values[0])))
        z = (np.asarray(values, dtype=np.float64) - self.mean) / self.scale
        score = float(z @ np.asarray(self.weights) + self.bias)
        return float(np.clip(np.interp(score, self.knots_x, self.knots_y), 0.0, 1.0))

    def to_dict(self) -> dict:
        return {name: list(v) if isinstance(v, tuple) else v for name, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, stored: dict | None) -> Calibration:
        """What ``to_dict`` wrote; None (a checkpoint never calibrated): :data:`UNCALIBRATED`."""
        if not stored:
            return UNCALIBRATED
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
        if tuple(values["features"]) != FEATURES:
            raise ValueError(
                f"confidence calibration of signals {values['features']}, this release reads "
                f"{FEATURES}: run seq2seq calibrate again"
            )
        return cls(**values)


UNCALIBRATED = Calibration(FEATURES, (), (), (), 0.0, (), ())


def fit(values: np.ndarray, chrf: np.ndarray, fitted_on: str = "") -> Calibration:
    """A :class:`Calibration` from signals (N, len(FEATURES)) and sentence chrF (N,) in
    [0, 100]: least squares on the standardised signals, then isotonic regression of chrF/100
    on the linear score."""
    values, target = np.asarray(values, dtype=np.float64), np.asarray(chrf, dtype=np.float64)
    mean, scale = values.mean(axis=0), values.std(axis=0) + 1e-9
    design = np.c_[(values - mean) / scale, np.ones(len(values))]
    solution = np.linalg.lstsq(design, target, rcond=None)[0]
    score = design @ solution
    knots_x, knots_y = isotonic(score, target / 100.0)
    return Calibration(
        FEATURES,
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(solution[:-1].tolist()),
        float(solution[-1]),
        tuple(knots_x),
        tuple(knots_y),
        fitted_on,
    )


def isotonic(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    """The non-decreasing least-squares fit of ``y`` on ``x`` (pool adjacent violators), as
    knots: each pooled block's mean x and its value."""
    order = np.argsort(x, kind="stable")
    blocks: list[list[float]] = []  # [sum x, sum y, count]
    for xi, yi in zip(x[order], y[order], strict=True):
        blocks.append([float(xi), float(yi), 1.0])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            last = blocks.pop()
            blocks[-1] = [a + b for a, b in zip(blocks[-1], last, strict=True)]
    return [b[0] / b[2] for b in blocks], [b[1] / b[2] for b in blocks]


def line_confidence(confidences: Sequence[float], weights: Sequence[int]) -> float | None:
    """A line's confidence from its sentences': their mean weighted by source tokens (None for
    a line with no sentence: nothing was translated)."""
    total = sum(weights)
    if not confidences or total <= 0:
        return None
    return sum(c * w for c, w in zip(confidences, weights, strict=True)) / total
