"""Confidence (seq2seq.inference.confidence) and ``seq2seq calibrate``: properties, not golden
numbers."""

import math

import numpy as np
import pytest

from seq2seq.cli import main
from seq2seq.cli.calibrate import spearman
from seq2seq.inference.confidence import (
    FEATURES,
    UNCALIBRATED,
    Calibration,
    fit,
    isotonic,
    line_confidence,
    signals,
)
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import synthetic_pairs


def test_isotonic_regression_is_the_non_decreasing_least_squares_fit():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    y = x + rng.normal(scale=2.0, size=300)
    knots_x, knots_y = isotonic(x, y)
    assert np.all(np.diff(knots_y) >= 0) and np.all(np.diff(knots_x) > 0)
    assert isotonic(np.arange(4.0), np.array([3.0, 2.0, 1.0, 0.0]))[1] == [1.5]  # one block
    increasing = np.sort(y)  # already in order: nothing is pooled
    assert isotonic(np.arange(300.0), increasing)[1] == pytest.approx(increasing.tolist())


def test_a_fit_ranks_as_the_signals_say_and_stays_in_zero_one():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(500, len(FEATURES)))
    chrf = 100 / (1 + np.exp(-(2 * values[:, 0] - values[:, 2]))) + rng.normal(scale=3, size=500)
    calibration = fit(values, np.clip(chrf, 0, 100), "synthetic")
    confidence = np.array([calibration(v) for v in values])
    assert calibration.calibrated and np.all((confidence >= 0) & (confidence <= 1))
    assert spearman(confidence, chrf) > 0.9
    # calibrated: the most confident tenth's chrF / 100 is near its confidence
    top = np.argsort(-confidence)[:50]
    assert abs(confidence[top].mean() - chrf[top].mean() / 100) < 0.05
    assert Calibration.from_dict(calibration.to_dict()) == calibration
    assert Calibration.from_dict(None) is UNCALIBRATED


def test_a_calibration_of_other_signals_is_refused_in_one_line():
    stored = fit(np.eye(3) + 1, np.array([10.0, 20.0, 30.0])).to_dict()
    stored["features"] = ["something_else"]
    with pytest.raises(ValueError, match="run seq2seq calibrate again"):
        Calibration.from_dict(stored)


def test_spearman_is_the_rank_correlation_with_ties():
    a = np.array([1.0, 2.0, 2.0, 3.0, 5.0])
    assert spearman(a, a**3) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 5, 40).astype(float), rng.normal(size=40)
    assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y)[0])


def test_a_lines_confidence_weighs_its_sentences_by_their_source():
    assert line_confidence([0.2, 0.8], [1, 3]) == pytest.approx(0.65)
    assert line_confidence([], []) is None


@pytest.fixture(scope="module")
def tiny(translation_checkpoint):
    return Translator.from_checkpoint(translation_checkpoint)


def test_confidence_comes_with_the_same_translations_whatever_the_batch(tiny):
    lines = ["I love you.", "", "Where is the station? It is far.", "Good morning."]
    options = TranslateOptions(beam_size=2)
    scored = tiny.translate_with_confidence(lines, options)
    assert [s.text for s in scored] == tiny.translate(lines, options)
    assert scored[1].confidence is None
    for line, (text, confidence) in zip(lines, scored, strict=True):
        if line:
            assert 0.0 <= confidence <= 1.0
            [(alone, conf)] = tiny.translate_with_confidence([line], options)
            assert alone == text and conf == pytest.approx(confidence, rel=1e-5)


def test_uncalibrated_confidence_is_the_tokens_geometric_mean_probability(tiny):
    [found] = tiny.translate_sentences(["I love you."], TranslateOptions(beam_size=1))
    best = found.hypotheses[0]
    expected = math.exp(best.log_prob / (len(best.tokens) + 1))
    assert found.signals == pytest.approx(
        signals(best.log_prob, len(best.tokens) + 1, 1)[:1] + found.signals[1:]
    )
    assert UNCALIBRATED(found.signals) == pytest.approx(expected)


@pytest.mark.slow
def test_calibrate_writes_a_fit_that_the_translator_then_uses(translation_checkpoint, tmp_path):
    pairs = synthetic_pairs()[:40]
    src, ref = tmp_path / "dev.en", tmp_path / "dev.zh"
    src.write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    out = tmp_path / "calibrated.ckpt"
    argv = ["calibrate", "--checkpoint", str(translation_checkpoint), "--src", str(src)]
    assert main([*argv, "--ref", str(ref), "--beam-size", "1", "--report", "none",
                 "--output", str(out)]) == 0  # fmt: skip
    calibrated = Translator.from_checkpoint(out)
    assert calibrated.calibration.calibrated
    assert "40 sentences" in calibrated.calibration.fitted_on
    assert not Translator.from_checkpoint(translation_checkpoint).calibration.calibrated
    lines = [en for en, _ in pairs[:5]]
    plain = calibrated.translate(lines, TranslateOptions(beam_size=1))
    assert [t.text for t in calibrated.translate_with_confidence(lines)] != [] and plain


def test_the_command_line_writes_confidences_or_keeps_the_source(
    translation_checkpoint, tmp_path, capsys
):
    lines = ["I love you.", "", "Where is the station?"]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["translate", "--checkpoint", str(translation_checkpoint), "--input", str(source)]
    assert main([*argv, "--beam-size", "1"]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert main([*argv, "--beam-size", "1", "--with-confidence"]) == 0
    scored = [line.split("\t", 1) for line in capsys.readouterr().out.splitlines()]
    assert [text for _, text in scored] == plain
    assert scored[1][0] == "" and all(0 <= float(c) <= 1 for c, _ in scored if c)
    assert main([*argv, "--beam-size", "1", "--min-confidence", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == lines and "line 1, 3" in err
    assert main([*argv, "--with-confidence", "--format", "html"]) == 2
    assert "--with-confidence takes plain text" in capsys.readouterr().err
