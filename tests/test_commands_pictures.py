"""End to end through ``seq2seq attention`` and ``seq2seq plot`` on the small fitted run
(conftest's ``run``)."""

from __future__ import annotations

import pytest

from seq2seq.cli import main
from tests.helpers import checkpoint_command

pytestmark = pytest.mark.slow


def test_attention_and_plot_commands_write_pictures(run, tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    attention = tmp_path / "attention.png"
    sentence = ("--text", "Tom will buy apples.", "--beam-size", 1)
    assert main(checkpoint_command("attention", checkpoint, *sentence, "--output", attention)) == 0
    one_layer = tmp_path / "layer0.png"
    head = ("--output", one_layer, "--layer", 0, "--head", 1)
    assert main(checkpoint_command("attention", checkpoint, *sentence, *head)) == 0
    with image_module.open(attention) as mean, image_module.open(one_layer) as head:
        assert mean.format == head.format == "PNG" and head.width > 300
        assert mean.size == head.size  # the test model has one decoder layer
        assert mean.tobytes() != head.tobytes()  # one head is not the mean of both
    curves = tmp_path / "curves.png"
    assert main(["plot", "--run", str(run / "logs"), "--output", str(curves)]) == 0
    with image_module.open(curves) as image:
        assert image.width > image.height > 300
    assert main(["attention", "--checkpoint", checkpoint, "--text", "x", "--layer", "7"]) == 2
