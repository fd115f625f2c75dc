"""Verbatim spans in every route: the Python API, plain text and documents, ``seq2seq translate``
and ``evaluate``, each server route (LibreTranslate's /translate and /translate_file, DeepL's
/v2/translate, our /v1/translate) and the CTranslate2 engine. On an untrained model, whatever it
writes: each span comes through exactly, and with the switch off the output is the model's own
(the engine's text of the sentence, decoded without the translator's help)."""

from __future__ import annotations

import json

import pytest

from seq2seq.cli import main
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import tiny_checkpoint

# One sentence a line (no splitting to depend on), each with spans of several kinds.
LINES = [
    "I will buy version 3.2.7 today.",
    "Tom can see info@shop.example and https://example.com/docs.",
    "She should eat 4,380.25 apples at 10:30.",
    "We will cook rice with max_tokens and the API.",
    "Hello %(name)s, my teacher can find {0} and --verbose.",
]
SPANS = [
    ["3.2.7"],
    ["info@shop.example", "https://example.com/docs"],
    ["4,380.25", "10:30"],
    ["max_tokens", "API"],
    ["%(name)s", "{0}", "--verbose"],
]
OPTIONS = TranslateOptions(beam_size=2, split=False)
OFF = TranslateOptions(beam_size=2, split=False, verbatim=False)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("verbatim") / "model.ckpt")


@pytest.fixture(scope="module")
def translator(checkpoint):
    return Translator.from_checkpoint(checkpoint)


def model_alone(translator: Translator, lines: list[str]) -> list[str]:
    """Each line's best hypothesis from the engine, as text: no documents, no markup."""
    found = [translator.decode_encoded(translator.encode([line]), 2)[0] for line in lines]
    return [translator.text(hyps[0].tokens) for hyps in found]


def assert_kept(outputs: list[str], spans: list[list[str]] = SPANS) -> None:
    for output, wanted in zip(outputs, spans, strict=True):
        for span in wanted:
            assert span in output, (span, output)


def test_the_python_api_keeps_every_span_and_off_is_the_model_alone(translator):
    alone = model_alone(translator, LINES)
    assert not any(span in out for out, spans in zip(alone, SPANS, strict=True) for span in spans)
    assert_kept([translator.translate([line], OPTIONS)[0] for line in LINES])
    assert [translator.translate([line], OFF)[0] for line in LINES] == alone
    found = translator.translate_n_best(LINES[:1], OPTIONS)  # n-best lists too
    assert "3.2.7" in found[0][0].text


def test_a_users_terms_and_the_built_in_kinds_switched_apart(translator):
    line = ["I will buy the Acme Cloud today, version 3.2.7."]
    own = TranslateOptions(beam_size=2, verbatim=Verbatim(["Acme Cloud"], builtin=False))
    [output] = translator.translate(line, own)
    assert "Acme Cloud" in output and "3.2.7" not in output
    [both] = translator.translate(line, TranslateOptions(beam_size=2, verbatim=Verbatim(["Acme"])))
    assert "Acme" in both and "3.2.7" in both
    with pytest.raises(ValueError, match="TranslateOptions.verbatim must be"):
        TranslateOptions(verbatim="yes")


@pytest.mark.parametrize(
    "format, document, code",
    [
        ("html", "<p>I will buy <b>version 3.2.7</b> and <code>x = 1.2.3</code> today.</p>", 1),
        ("markdown", "# Apples\n\nI will buy **version 3.2.7** and `x = 1.2.3` today.\n", 1),
        ("srt", "1\n00:00:01,000 --> 00:00:02,000\nI will buy version 3.2.7 today.\n", 0),
    ],
)
def test_documents_keep_spans_in_running_text_and_leave_code_as_it_was(
    translator, format, document, code
):
    options = TranslateOptions(beam_size=2, format=format)
    [output] = translator.translate([document], options)
    assert "3.2.7" in output and output.count("x = 1.2.3") == code
    clean = document.replace("version 3.2.7", "the red bag")  # no span: the switch is moot
    both = [
        translator.translate([clean], TranslateOptions(beam_size=2, format=format, verbatim=v))
        for v in (True, False)
    ]
    assert both[0] == both[1]
    [plain] = translator.translate(
        [document], TranslateOptions(beam_size=2, format=format, verbatim=False)
    )
    assert "3.2.7" not in plain and plain.count("x = 1.2.3") == code


def test_translate_and_evaluate_take_verbatim_options(checkpoint, translator, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    keep = tmp_path / "keep.txt"
    keep.write_text("# ours\nTom\nre:te[a-z]+er\n", encoding="utf-8")

    def translate(*flags: str) -> list[str]:
        out = tmp_path / "out.zh"
        command = ["translate", "--checkpoint", str(checkpoint), "--input", str(source)]
        assert main([*command, "--output", str(out), "--beam-size", "2", "--no-split", *flags]) == 0
        return out.read_text(encoding="utf-8").splitlines()

    assert_kept(translate())
    assert translate("--no-verbatim") == model_alone(translator, LINES)
    own = translate("--no-verbatim", "--verbatim", str(keep))
    assert "Tom" in own[1] and "teacher" in own[4] and "3.2.7" not in own[0]
    (tmp_path / "ref.zh").write_text("\n".join(translate()) + "\n", encoding="utf-8")
    capsys.readouterr()
    command = ["evaluate", "--checkpoint", str(checkpoint), "--src", str(source), "--json"]
    command += ["--ref", str(tmp_path / "ref.zh"), "--beam-size", "2", "--no-split"]
    assert main(command) == 0 and main([*command, "--no-verbatim"]) == 0
    kept, off = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert off["verbatim_builtin"] is False and "verbatim_builtin" not in kept
    assert kept["bleu"] == 100.0 > off["bleu"]


@pytest.mark.parametrize("command", ["translate", "evaluate", "serve"])
def test_a_bad_do_not_translate_file_is_one_line_before_the_model_loads(
    checkpoint, tmp_path, capsys, monkeypatch, command
):
    bad = tmp_path / "keep.txt"
    bad.write_text("Acme\nre:(x|\n", encoding="utf-8")
    monkeypatch.setattr(Translator, "from_checkpoint", _no_model)
    monkeypatch.setattr("seq2seq.serve.served_model.ServedModel.load", _no_model)
    args = [command, "--checkpoint", str(checkpoint), "--verbatim", str(bad)]
    args += ["--src", str(bad), "--ref", str(bad)] if command == "evaluate" else []
    args += ["--input", str(bad)] if command == "translate" else []
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"seq2seq {command}: error: {bad}:2: verbatim pattern '(x|'")
    assert "does not compile" in err and "\n" not in err


def _no_model(*args, **kwargs):
    raise AssertionError("the model loaded before the options were checked")


def test_every_server_route_keeps_spans_and_takes_the_switches(checkpoint, translator, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seq2seq.cli.arguments import build_parser
    from seq2seq.cli.commands import _server_settings
    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.served_model import ServedModel

    served = ServedModel.load(checkpoint)
    alone = model_alone(translator, LINES)
    keep = tmp_path / "keep.txt"
    keep.write_text("teacher\n", encoding="utf-8")
    parse = build_parser().parse_args
    assert _server_settings(parse(["serve", "--checkpoint", "x", "--no-verbatim"])).verbatim is None
    own = _server_settings(parse(["serve", "--checkpoint", "x", "--verbatim", str(keep)])).verbatim
    assert own.terms == ["teacher"] and own.builtin

    def answers(client, route: str, **extra) -> list[str]:
        texts = []
        for line in LINES:  # one line a request: batches as model_alone's
            texts.append(_ask(client, route, line, **extra))
        return texts

    with TestClient(create_app(served, ServerSettings(continuous=False, beam_size=2))) as client:
        for route in ("/v1/translate", "/translate", "/v2/translate", "/translate_file"):
            assert_kept(answers(client, route))
        assert answers(client, "/v1/translate", verbatim=False) == alone
    off = ServerSettings(continuous=False, beam_size=2, verbatim=None)
    with TestClient(create_app(served, off)) as client:
        assert answers(client, "/translate") == alone
        assert answers(client, "/v1/translate", verbatim=True) == alone  # the server's: none
    assert served.translator.verbatim is not None  # the app's setting left the model's own


def _ask(client, route: str, line: str, **extra) -> str:
    if route == "/v1/translate":
        body = {"text": line, "beam_size": 2, "split": False, **extra}
        answer = client.post(route, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()["translations"][0]["text"]
    if route == "/translate":
        answer = client.post(route, json={"q": line, "source": "en", "target": "zh"})
        return answer.json()["translatedText"]
    if route == "/v2/translate":
        answer = client.post(route, json={"text": [line], "target_lang": "ZH"})
        return answer.json()["translations"][0]["text"]
    upload = {"file": ("one.txt", line.encode(), "text/plain")}
    answer = client.post(route, data={"source": "en", "target": "zh"}, files=upload)
    url = answer.json()["translatedFileUrl"]
    return client.get(url[url.index("/download_file/") :]).text.strip()


def test_the_ctranslate2_engine_keeps_spans_by_position(checkpoint, tmp_path):
    pytest.importorskip("ctranslate2")
    from seq2seq.tools.export import export_ctranslate2

    exported = export_ctranslate2(checkpoint, tmp_path / "ct2")
    translator = Translator.from_ctranslate2(exported)
    assert getattr(translator.engine, "attention", None) is None  # a monotonic alignment
    assert_kept([translator.translate([line], OPTIONS)[0] for line in LINES])
    assert [translator.translate([line], OFF)[0] for line in LINES] == model_alone(
        translator, LINES
    )
    [html] = translator.translate(
        ["<p>Buy <b>version 3.2.7</b> now.</p>"], TranslateOptions(beam_size=2, format="html")
    )
    assert "3.2.7" in html and html.startswith("<p>") and html.endswith("</p>")


def test_a_sentence_whose_translation_holds_its_spans_is_not_aligned(translator):
    from seq2seq.decoding.search import Hypothesis
    from seq2seq.formats import parse_text
    from seq2seq.inference.documents import TextBatch
    from seq2seq.inference.word_alignment import needed_alignments

    documents = [parse_text("I will buy version 3.2.7 today. We will cook rice.")]
    batch = TextBatch(documents, verbatim=Verbatim())
    assert batch.aligned == [("3.2.7",), ()]
    plans = translator.plan(batch.sentences)
    tokenizer = translator.tokenizer

    def hypotheses(*texts: str) -> list[list[Hypothesis]]:
        return [[Hypothesis(tokenizer.encode_target(t), 0.0, 0.0)] for t in texts]

    assert needed_alignments(batch.aligned, plans, hypotheses("a 3.2.7 b", "c"), tokenizer) == [
        False,
        False,
    ]
    needed = needed_alignments(batch.aligned, plans, hypotheses("a 3.2.77", "c"), tokenizer)
    assert needed == [True, False]
    assert needed_alignments([True, False], plans, hypotheses("x", "y"), tokenizer) == [True, False]
