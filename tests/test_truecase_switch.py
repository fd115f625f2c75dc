"""The truecaser off: a checkpoint without learnt word forms and an imported OPUS-MT model read
every line as written (translations equal to those with the truecaser switched off), and
``TranslateOptions(truecase=False)``, ``translate --no-truecase``, ``evaluate --no-truecase``,
``serve --no-truecase`` and a ``/v1/translate`` request's ``"truecase": false`` switch it off
for a checkpoint that has them."""

from __future__ import annotations

import json

import pytest
import torch

from seq2seq.cli import main
from seq2seq.data.clean import normalize_en
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, TRUECASE_KEY
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import tiny_checkpoint

CASED = [
    "TOM WILL BUY APPLES TODAY.",
    "Tom Will Buy Apples Today.",
    "SHE CAN SEE THE SMALL DOG TOMORROW.",
    "Paris, France",
    "ＷＨＥＲＥ ＩＳ ＴＯＭ？",
    "HELLO",
]
FORMS = {"tom": "Tom", "paris": "Paris"}
OPTIONS = TranslateOptions(beam_size=2, split=False)


def as_written(translator: Translator) -> Translator:
    """The translator with its truecaser replaced by the identity, as the real-text bench
    switched it off before there was a switch (independent of the code under test)."""
    translator.truecaser.normalize = lambda text: text  # type: ignore[method-assign]
    return translator


def one_at_a_time(translator: Translator, lines: list[str], options=OPTIONS) -> list[str]:
    # One line per call: an untrained model's near-ties may differ between rows of a batch.
    return [translator.translate([line], options)[0] for line in lines]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A checkpoint that never learnt word forms (no ``truecase`` in its section)."""
    return tiny_checkpoint(tmp_path_factory.mktemp("plain") / "plain.ckpt")


@pytest.fixture(scope="module")
def learnt(plain, tmp_path_factory):
    """The same model with learnt word forms."""
    checkpoint = torch.load(plain, weights_only=False)
    checkpoint[CHECKPOINT_KEY][TRUECASE_KEY] = FORMS
    path = tmp_path_factory.mktemp("learnt") / "learnt.ckpt"
    torch.save(checkpoint, path)
    return path


def test_a_checkpoint_without_learnt_forms_reads_every_line_as_written(plain):
    translator = Translator.from_checkpoint(plain)
    tokenizer = translator.tokenizer
    assert translator.encode(CASED) == [tokenizer.encode_source(normalize_en(x)) for x in CASED]
    written = one_at_a_time(as_written(Translator.from_checkpoint(plain)), CASED)
    assert one_at_a_time(translator, CASED) == written


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_an_imported_opus_mt_model_translates_exactly_as_before_the_truecaser(tmp_path):
    pytest.importorskip("transformers")
    from seq2seq.tools.pretrained import import_marian
    from tests.opus_mt import build_opus_mt_like

    directory = build_opus_mt_like(tmp_path / "hf")
    checkpoint = import_marian(str(directory), tmp_path / "imported.ckpt", ">>cmn_Hans<<")
    translator = Translator.from_checkpoint(checkpoint)
    written = one_at_a_time(as_written(Translator.from_checkpoint(checkpoint)), CASED)
    assert one_at_a_time(translator, CASED) == written
    assert translator.encode(["Paris, France"]) == as_written(translator).encode(["Paris, France"])
    assert not translator.truecaser.learnt


def test_truecase_false_reads_lines_as_written(learnt):
    translator = Translator.from_checkpoint(learnt)
    off = TranslateOptions(beam_size=2, split=False, truecase=False)
    written = one_at_a_time(as_written(Translator.from_checkpoint(learnt)), CASED)
    assert one_at_a_time(translator, CASED, off) == written
    assert one_at_a_time(translator, CASED) != written  # the switch changed something
    assert translator.truecaser.normalize("TOM") == "Tom"  # and left the translator's own
    plain_ids = [p.ids for p in translator.with_truecase(False).plan(["TOM WILL"])[0]]
    assert plain_ids == [translator.tokenizer.encode_source("TOM WILL")]


def test_truecase_must_be_a_bool():
    with pytest.raises(ValueError, match="TranslateOptions.truecase must be True or False"):
        TranslateOptions(truecase="no")


def test_translate_and_evaluate_take_no_truecase(plain, learnt, tmp_path, capsys):
    # The CLI against itself: the same weights without learnt forms read as written (above).
    source = tmp_path / "in.en"
    source.write_text("\n".join(CASED) + "\n", encoding="utf-8")

    def translate(checkpoint, *flags: str) -> list[str]:
        out = tmp_path / "out.zh"
        command = ["translate", "--checkpoint", str(checkpoint), "--input", str(source)]
        assert main([*command, "--output", str(out), "--beam-size", "2", *flags]) == 0
        return out.read_text(encoding="utf-8").splitlines()

    written = translate(plain)
    assert translate(learnt, "--no-truecase") == written != translate(learnt)
    (tmp_path / "ref.zh").write_text("\n".join(written) + "\n", encoding="utf-8")
    capsys.readouterr()
    command = ["evaluate", "--checkpoint", str(learnt), "--src", str(source), "--json"]
    command += ["--ref", str(tmp_path / "ref.zh"), "--beam-size", "2"]
    assert main(command) == 0 and main([*command, "--no-truecase"]) == 0
    truecased, off = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert off["truecase"] is False and "truecase" not in truecased
    assert off["bleu"] == 100.0 > truecased["bleu"]


def test_serve_and_a_request_take_the_switch(learnt):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seq2seq.cli.arguments import build_parser
    from seq2seq.cli.commands import _server_settings
    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.served_model import ServedModel

    args = build_parser().parse_args(["serve", "--checkpoint", str(learnt), "--no-truecase"])
    assert _server_settings(args).truecase is False and ServerSettings().truecase is True
    served = ServedModel.load(learnt)
    options = TranslateOptions(beam_size=2)
    truecased = [Translator.from_checkpoint(learnt).translate([x], options)[0] for x in CASED]
    written = one_at_a_time(as_written(Translator.from_checkpoint(learnt)), CASED, options)
    assert truecased != written

    def answers(settings: ServerSettings, **request) -> list[str]:
        with TestClient(create_app(served, settings)) as client:
            texts = []
            for text in CASED:  # one line a request: batches as one_at_a_time's
                body = {"text": text, "beam_size": 2, **request}
                response = client.post("/v1/translate", json=body)
                assert response.status_code == 200, response.text
                texts.append(response.json()["translations"][0]["text"])
            return texts

    assert answers(ServerSettings(continuous=False)) == truecased
    assert answers(ServerSettings(continuous=False), truecase=False) == written
    assert answers(ServerSettings(continuous=False, truecase=False)) == written
    assert served.translator.truecaser.learnt  # the app's setting left the model's own
    with TestClient(create_app(served, ServerSettings(continuous=False))) as client:
        sources = [
            client.post(
                "/v1/translate",
                json={"text": "TOM WILL", "return_attention": True, "truecase": truecase},
            ).json()["translations"][0]["attention"]["source"]
            for truecase in (True, False)
        ]
    ids = [served.translator.tokenizer.encode_source(text) for text in ("Tom will", "TOM WILL")]
    assert sources == [served.tokens(i) for i in ids] and sources[0] != sources[1]
