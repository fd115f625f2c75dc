"""The translation API over real loopback HTTP: LibreTranslate's /translate, /languages and
/detect (with the libretranslatepy client from PyPI, and raw JSON, form and query requests),
our /v1/translate, limits, bad input and API keys."""

from __future__ import annotations

import json
import urllib.error

import httpx
import pytest

from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.serving import SENTENCES
from tests.serving import libre_translate as translate

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow, pytest.mark.serial]


def test_the_libretranslatepy_client_translates_and_lists_languages(translation_server, translator):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(translation_server.url)  # form-encoded POSTs, as it sends them
    assert client.translate(SENTENCES[0], "en", "zh") == translator.translate(SENTENCES[:1])[0]
    targets = ["zh", "zt", "zh-TW", "zh-HK"]
    assert client.languages()[0] == {"code": "en", "name": "English", "targets": targets}
    assert client.detect("Hello there")[0]["language"] == "en"
    with pytest.raises(urllib.error.HTTPError) as caught:
        client.translate("Hello.", "en", "fr")
    assert caught.value.code == 400
    assert json.loads(caught.value.read()) == {
        "error": "fr is not supported (target languages: zh, zh-Hans, zh-CN, zt, zh-Hant, "
        "zh-TW, zh-HK)"
    }


def texts_only(answer: dict) -> dict:
    """A LibreTranslate answer without its confidence (tests/test_serve_confidence.py's)."""
    return {key: value for key, value in answer.items() if key != "confidence"}


def test_json_form_and_query_arguments_give_the_same_answer(http, translator):
    expected = {"translatedText": translator.translate(SENTENCES[:1])[0]}
    form = {"q": SENTENCES[0], "source": "en", "target": "zh-Hans"}
    assert texts_only(translate(http, q=SENTENCES[0]).json()) == expected
    assert texts_only(http.post("/translate", data=form).json()) == expected
    assert texts_only(http.post("/translate", params=form).json()) == expected
    assert texts_only(http.get("/translate", params=form).json()) == expected
    files = {name: (None, value) for name, value in form.items()}  # multipart/form-data
    assert texts_only(http.post("/translate", files=files).json()) == expected


def test_an_array_q_answers_an_array_in_order_with_alternatives_and_detection(http, translator):
    q = [SENTENCES[1], "", SENTENCES[2]]
    answer = translate(http, q=q, source="auto", alternatives=2).json()
    assert answer["translatedText"] == translator.translate(q)
    assert [len(a) for a in answer["alternatives"]] == [2, 0, 2]
    nbest = translator.translate_n_best(q, TranslateOptions(beam_size=5, n_best=3, split=False))
    decoded = [[translator.tokenizer.decode(h.tokens) for h in hyps] for hyps in nbest]
    assert answer["alternatives"][0] == decoded[0][1:]
    english = {"confidence": 100.0, "language": "en"}
    nothing = {"confidence": 0.0, "language": "en"}  # "": LibreTranslate's "none detected"
    assert answer["detectedLanguage"] == [english, nothing, english]
    single = translate(http, q=SENTENCES[1], alternatives=1).json()
    assert single["alternatives"] == decoded[0][1:2] and "detectedLanguage" not in single


def test_multi_line_text_keeps_its_lines(http, translator):
    text = f"{SENTENCES[0]}\n\n{SENTENCES[1]}\r\n{SENTENCES[2]}\n"
    out = translate(http, q=text).json()["translatedText"]
    lines = translator.translate(SENTENCES)
    assert out == f"{lines[0]}\n\n{lines[1]}\n{lines[2]}\n"


@pytest.mark.parametrize(
    ("request_args", "status", "message"),
    [
        ({"json": {"source": "en", "target": "zh"}}, 400, "missing q parameter"),
        ({"json": {"q": 3, "source": "en", "target": "zh"}}, 400, "q must be a string"),
        ({"json": {"q": "a", "source": "en", "target": "de"}}, 400, "de is not supported"),
        ({"json": {"q": "a", "source": "en", "target": "zh", "format": "xml"}}, 400, "xml"),
        (
            {"content": b'{"q": "a",', "headers": {"content-type": "application/json"}},
            400,
            "malformed JSON body",
        ),
        (
            {"json": {"q": "x" * 30001, "source": "en", "target": "zh"}},
            400,
            r"request (30001 characters) exceeds text limit (30000)",
        ),
        (
            {"json": {"q": ["a"] * 1001, "source": "en", "target": "zh"}},
            400,
            r"request (1001 texts) exceeds batch limit (1000)",
        ),
    ],
)
def test_bad_requests_get_one_line_400s(http, request_args, status, message):
    response = http.post("/translate", **request_args)
    assert response.status_code == status
    error = response.json()["error"]
    assert message in error and "\n" not in error


def test_odd_input_is_answered_never_a_500(http):
    """Invalid UTF-8 in a form, control characters, emoji, a 5,000-character line with no
    punctuation (5,000 tokens for the tiny tokenizer: 40 windows, each decoded to its limit by
    the untrained model; 20,000 characters took 18 s alone on 2 AVX2 cores, over the client's
    60 s beside another test worker), 1,000 empty strings: each answered with a translation
    of the right shape."""
    bad_utf8 = http.post(
        "/translate",
        content=b"q=caf%E9%FF+ok&source=en&target=zh",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert bad_utf8.status_code == 200 and isinstance(bad_utf8.json()["translatedText"], str)
    odd = ["tab\there\x00nul\x1b[31m", "I love 🍎 and 🚗!", "word " * 1000, "\u200b\ufeff"]
    answer = translate(http, q=odd)
    assert answer.status_code == 200
    assert [("\n" in t) for t in answer.json()["translatedText"]] == [False] * 4
    lone = b'{"q": "a\\ud800b", "source": "en", "target": "zh"}'
    surrogate = http.post("/translate", content=lone, headers={"content-type": "application/json"})
    assert surrogate.status_code == 200  # a lone surrogate (valid JSON, not Unicode): U+FFFD
    native = http.post(
        "/v1/translate",
        content=b'{"text": "\\udc00"}',
        headers={"content-type": "application/json"},
    )
    assert native.status_code == 200
    infinite = http.post(
        "/translate",
        content=b'{"q": "a", "source": "en", "target": "zh", "alternatives": Infinity}',
        headers={"content-type": "application/json"},
    )
    assert infinite.status_code == 400 and "alternatives" in infinite.json()["error"]
    wrong_method = http.delete("/translate")
    assert wrong_method.status_code == 405 and wrong_method.json() == {
        "error": "Method Not Allowed"
    }
    empty = translate(http, q=[""] * 1000).json()
    assert empty == {"translatedText": [""] * 1000, "confidence": [None] * 1000}
    assert translate(http, q="").json() == {"translatedText": "", "confidence": None}


def test_native_endpoint_gives_scored_nbest_lists_and_attention(http, translator):
    body = {"text": [SENTENCES[0], ""], "beam_size": 4, "n_best": 3, "return_attention": True}
    answer = http.post("/v1/translate", json=body).json()
    first, empty = answer["translations"]
    assert answer["beam_size"] == 4
    assert empty == {"text": "", "hypotheses": [], "attention": None, "confidence": None}
    nbest = translator.translate_n_best(
        [SENTENCES[0]], TranslateOptions(beam_size=4, n_best=3, split=False)
    )[0]
    assert [h["score"] for h in first["hypotheses"]] == [round(h.score, 4) for h in nbest]
    scores = [h["score"] for h in first["hypotheses"]]
    assert scores == sorted(scores, reverse=True)
    assert first["text"] == first["hypotheses"][0]["text"]
    attention = first["attention"]
    ids = translator.encode([SENTENCES[0]])[0]
    assert attention["source"] == [translator.tokenizer.id_to_piece(i) for i in ids]
    eos = translator.engine.model.config.eos_id
    assert attention["target"] == [
        translator.tokenizer.id_to_piece(i) for i in [*nbest[0].tokens, eos]
    ]
    weights = attention["weights"]
    assert len(weights) == len(attention["target"]) and {len(r) for r in weights} == {len(ids)}
    assert all(abs(sum(row) - 1.0) < 1e-2 for row in weights)  # each row a distribution
    plain = http.post("/v1/translate", json={"text": SENTENCES[0], "beam_size": 4}).json()
    [only] = plain["translations"]
    assert texts_only(only) == {"text": first["text"]} and "warnings" not in answer


def test_native_endpoint_says_when_it_widens_the_beam_to_fit_n_best(http, translator):
    answer = http.post(
        "/v1/translate", json={"text": SENTENCES[0], "beam_size": 2, "n_best": 3}
    ).json()
    assert answer["beam_size"] == 3
    assert answer["warnings"] == [
        "beam_size 2 raised to 3 to return n_best 3 (a beam finds at most beam_size hypotheses)"
    ]
    nbest = translator.translate_n_best(
        [SENTENCES[0]], TranslateOptions(beam_size=3, n_best=3, split=False)
    )[0]
    scores = [h["score"] for h in answer["translations"][0]["hypotheses"]]
    assert scores == [round(h.score, 4) for h in nbest]  # decoded with the beam it names
    # no beam_size asked: the server's 5 widened to n_best 6 overrides nothing the client said
    default = http.post("/v1/translate", json={"text": SENTENCES[2], "n_best": 6}).json()
    assert default["beam_size"] == 6 and "warnings" not in default


@pytest.mark.parametrize(
    "body", [{"text": "a", "beam_size": 0}, {"text": 5}, {"txt": "a"}, {"text": "a", "n_best": 99}]
)
def test_native_endpoint_validation_errors_are_one_line_400s(http, body):
    response = http.post("/v1/translate", json=body)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid request:")


def test_detect_answers_the_languages_of_the_text_by_script(http, translation_server):
    from libretranslatepy import LibreTranslateAPI

    def detect(q: str) -> list[dict]:
        response = http.post("/detect", json={"q": q})
        assert response.status_code == 200
        return response.json()

    assert detect("Where is the station?") == [{"confidence": 100.0, "language": "en"}]
    assert detect("车站在哪里？") == [{"confidence": 100.0, "language": "zh"}]
    # mixed: each script's share of the letters (4 of 6 here), most confident first
    assert detect("我爱 ab 北京") == [
        {"confidence": 66.7, "language": "zh"},
        {"confidence": 33.3, "language": "en"},
    ]
    assert detect("12:30 !?") == [{"confidence": 0.0, "language": "en"}]  # LibreTranslate's
    empty = http.post("/detect", json={"q": ""})
    assert (empty.status_code, empty.json()) == (
        400,
        {"error": "Invalid request: missing q parameter"},
    )
    client = LibreTranslateAPI(translation_server.url)  # form-encoded, as it sends
    assert client.detect("车站在哪里？") == [{"confidence": 100.0, "language": "zh"}]
    auto = translate(http, q=["车站在哪里？", "Hi."], source="auto").json()
    assert [d["language"] for d in auto["detectedLanguage"]] == ["zh", "en"]


def test_health_languages_settings_and_page(http):
    assert http.get("/health").json() == {"status": "ok"}
    codes = ["en", "zh", "zt", "zh-TW", "zh-HK"]
    assert [lang["code"] for lang in http.get("/languages").json()] == codes
    settings = http.get("/frontend/settings").json()
    assert (settings["mode"], settings["charLimit"], settings["keyRequired"]) == (
        "translate",
        30000,
        False,
    )
    assert http.get("/").headers["content-type"].startswith("text/html")


def test_requests_are_logged_one_line_each(http, translation_server):
    translate(http, q=["a b", "c", ""])
    lines = [line for line in translation_server.log if "POST /translate 200 2 sentences" in line]
    assert lines and lines[-1].rstrip().endswith("ms")
    assert any(
        "serving translator (encoder-decoder translator, torch engine on cpu, float32, beam 5)"
        in line
        for line in translation_server.log
    )


def test_an_int8_server_says_int8_when_it_starts(translation_checkpoint):
    from seq2seq.inference.int8 import QUANTIZATION_AVAILABLE
    from tests.serving import running_server

    if not QUANTIZATION_AVAILABLE:
        pytest.skip("no fbgemm in this torch")
    expected = Translator.from_checkpoint(translation_checkpoint, quantize="int8")
    with running_server(translation_checkpoint, "--quantize", "int8", "--beam-size", "2") as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = translate(http, q=SENTENCES[:2]).json()
    [line] = [line for line in server.log if " serving translator " in line]
    assert "(encoder-decoder translator, torch engine on cpu, int8, beam 2)" in line
    assert texts_only(answer) == {
        "translatedText": expected.translate(SENTENCES[:2], TranslateOptions(beam_size=2))
    }


def test_api_keys_are_required_when_a_key_file_is_given(translation_checkpoint, tmp_path):
    from libretranslatepy import LibreTranslateAPI

    from tests.serving import running_server

    keys = tmp_path / "keys.txt"
    keys.write_text("# team keys\nsecret-1\n\nsecret-2\n")
    with running_server(translation_checkpoint, "--api-keys", str(keys)) as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            missing = translate(http, q="Hello.")
            assert (missing.status_code, missing.json()) == (
                403,
                {"error": "Please provide an API key"},
            )
            wrong = translate(http, q="Hello.", api_key="guess")
            assert (wrong.status_code, wrong.json()) == (403, {"error": "Invalid API key"})
            assert translate(http, q="Hello.", api_key="secret-2").status_code == 200
            bearer = {"authorization": "Bearer secret-1"}
            assert http.post("/v1/translate", json={"text": "a"}, headers=bearer).status_code == 200
            assert http.get("/frontend/settings").json()["keyRequired"] is True
        assert isinstance(
            LibreTranslateAPI(server.url, "secret-1").translate("Hi.", "en", "zh"), str
        )


def test_without_a_key_file_a_key_is_accepted_and_ignored(http):
    assert translate(http, q="Hello.", api_key="anything").status_code == 200


def test_a_decoder_only_translator_serves_translate_like_an_encoder_decoder(tmp_path):
    from tests.helpers import tiny_checkpoint
    from tests.serving import running_server

    checkpoint = tiny_checkpoint(tmp_path / "joined.ckpt", joined=True)
    translator = Translator.from_checkpoint(checkpoint)
    with running_server(checkpoint, "--beam-size", "2") as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = translate(http, q=SENTENCES[:2]).json()
            native = http.post(
                "/v1/translate", json={"text": SENTENCES[0], "return_attention": True}
            ).json()
            settings = http.get("/frontend/settings").json()
    assert answer["translatedText"] == translator.translate(
        SENTENCES[:2], TranslateOptions(beam_size=2)
    )
    assert settings["kind"] == "decoder-only translator" and settings["mode"] == "translate"
    attention = native["translations"][0]["attention"]
    source = translator.encode(SENTENCES[:1])[0]
    assert len(attention["source"]) == len(source)
    assert {len(row) for row in attention["weights"]} == {len(source)}
    assert len(attention["weights"]) == len(attention["target"])


def test_a_ctranslate2_export_is_served_with_the_same_api(translation_checkpoint, tmp_path):
    pytest.importorskip("ctranslate2")
    from seq2seq.tools.export import export_ctranslate2
    from tests.serving import running_server

    directory = export_ctranslate2(translation_checkpoint, tmp_path / "ct2")
    expected = Translator.from_ctranslate2(directory).translate(
        SENTENCES, TranslateOptions(beam_size=5)
    )
    with running_server(directory, "--engine", "ctranslate2") as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = texts_only(translate(http, q=SENTENCES).json())
            assert answer == {"translatedText": expected}
            refused = http.post("/v1/translate", json={"text": "a", "return_attention": True})
            assert refused.status_code == 400 and "torch engine" in refused.json()["error"]
            assert http.get("/frontend/settings").json()["attention"] is False


def test_attention_requests_get_attention_whatever_they_are_batched_with(http):
    """An attention request arriving with plain ones must not be decoded without attention."""
    import asyncio

    async def together():
        async with httpx.AsyncClient(base_url=str(http.base_url), timeout=60) as client:
            plain = [
                client.post("/translate", json={"q": s, "source": "en", "target": "zh"})
                for s in SENTENCES * 3
            ]
            native = client.post(
                "/v1/translate", json={"text": SENTENCES[1], "return_attention": True}
            )
            return await asyncio.gather(*plain[:4], native, *plain[4:])

    answers = asyncio.run(together())
    attention = answers[4].json()["translations"][0]["attention"]
    assert attention is not None and len(attention["weights"]) == len(attention["target"])


def test_n_best_of_a_text_of_sentences_is_the_translate_n_best_of_the_cli(http, translator):
    text = f"{SENTENCES[0]} {SENTENCES[1]}"
    answer = http.post("/v1/translate", json={"text": text, "n_best": 3, "beam_size": 3}).json()
    served = answer["translations"][0]["hypotheses"]
    local = translator.translate_n_best([text], TranslateOptions(beam_size=3, n_best=3))[0]
    assert [h["text"] for h in served] == [h.text for h in local]
    assert [h["score"] for h in served] == [round(h.score, 4) for h in local]
    assert [h["score"] for h in served] == sorted((h["score"] for h in served), reverse=True)
