"""A checkpoint written by an earlier release still loads and translates as it did then.

``tests/data/release-0.1.0.ckpt`` was written by ``seq2seq fit`` (250 steps on the synthetic
pairs) before the package layout of issue 30 moved the modules, with its hyper-parameters as a
module built in Python saves them: ``ModelConfig`` and ``SearchConfig`` objects, pickled under
the module paths of that release. ``release-0.1.0.expected.json`` holds what that release
translated with it; ``changed_since`` names the outputs later, deliberate changes of the
searches moved, and why.
"""

import json
from pathlib import Path

import pytest

from seq2seq.inference.glossary import Glossary
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator

DATA = Path(__file__).parent / "data"
CHECKPOINT = DATA / "release-0.1.0.ckpt"


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((DATA / "release-0.1.0.expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.from_checkpoint(CHECKPOINT)


def test_it_translates_as_the_release_that_wrote_it(translator, expected):
    lines = expected["lines"]
    assert translator.translate(lines, TranslateOptions(beam_size=1)) == expected["greedy"]
    assert translator.translate(lines, TranslateOptions(beam_size=4)) == expected["beam4"]


def test_its_glossary_and_int8_translations_are_unchanged(translator, expected):
    lines, glossary = expected["lines"], Glossary.from_dict(expected["glossary_terms"])
    assert (
        translator.translate(lines, TranslateOptions(beam_size=4, glossary=glossary))
        == expected["glossary_beam4"]
    )
    int8 = Translator.from_checkpoint(CHECKPOINT, quantize="int8")
    assert int8.translate(lines, TranslateOptions(beam_size=1)) == expected["int8_greedy"]
