"""A confidence beside every served translation, and min_confidence, over real loopback HTTP:
LibreTranslate's /translate (libretranslatepy and plain JSON), DeepL's /v2/translate (DeepL's
client, which ignores the extra field) and our /v1/translate."""

from __future__ import annotations

import pytest

from seq2seq.inference.options import TranslateOptions

pytest.importorskip("fastapi")
deepl = pytest.importorskip("deepl")
pytestmark = [pytest.mark.slow, pytest.mark.serial]

TEXTS = ["My teacher will buy apples today.", "", "She can see the book tomorrow. We should eat."]


@pytest.fixture(scope="module")
def served(translation_checkpoint):
    from seq2seq.serve.served_model import ServedModel

    return ServedModel.load(translation_checkpoint)


@pytest.fixture(scope="module")
def url(served):
    from tests.test_serve_deepl import serving

    with serving(served) as address:
        yield address


@pytest.fixture(scope="module")
def expected(served):
    """What the Python API gives the same texts at the server's beam."""
    from seq2seq.serve.handling import ServerSettings

    options = TranslateOptions(beam_size=ServerSettings().beam_size)
    return served.translator.translate_with_confidence(TEXTS, options)


def _close(answer: list, expected: list) -> bool:
    return all(
        (a is None and e.confidence is None) or a == pytest.approx(e.confidence, abs=1e-4)
        for a, e in zip(answer, expected, strict=True)
    )


def test_libretranslate_gives_a_confidence_per_text(http, expected):
    answer = http.post("/translate", json={"q": TEXTS, "source": "en", "target": "zh"}).json()
    assert answer["translatedText"] == [e.text for e in expected]
    assert _close(answer["confidence"], expected)
    single = http.post("/translate", json={"q": TEXTS[0], "source": "en", "target": "zh"}).json()
    assert single["confidence"] == pytest.approx(expected[0].confidence, abs=1e-4)


def test_below_min_confidence_the_source_comes_back_and_says_so(http, url):
    body = {"q": TEXTS, "source": "en", "target": "zh", "min_confidence": 1.0}
    answer = http.post("/translate", json=body).json()
    assert answer["translatedText"] == TEXTS  # nothing is trusted at 1.0 (the empty is empty)
    assert answer["belowMinConfidence"] == [True, False, True]
    answer = http.post("/translate", json={**body, "min_confidence": 0.0}).json()
    assert answer["belowMinConfidence"] == [False, False, False]
    bad = http.post("/translate", json={**body, "min_confidence": "high"})
    assert bad.status_code == 400 and "min_confidence" in bad.json()["error"]
    from libretranslatepy import LibreTranslateAPI  # the real client still reads the answer

    assert LibreTranslateAPI(url + "/").translate(TEXTS[0], "en", "zh")


def test_deepl_gives_a_confidence_beside_each_translation(http, url, expected):
    answer = http.post(
        "/v2/translate", json={"text": TEXTS, "target_lang": "ZH", "min_confidence": 1.0}
    ).json()["translations"]
    assert [t["text"] for t in answer] == TEXTS
    assert [t.get("below_min_confidence", False) for t in answer] == [True, False, True]
    answer = http.post("/v2/translate", json={"text": TEXTS, "target_lang": "ZH"}).json()
    assert _close([t["confidence"] for t in answer["translations"]], expected)
    results = deepl.Translator("any-key", server_url=url).translate_text(TEXTS, target_lang="ZH")
    assert [r.text for r in results] == [e.text for e in expected]  # the client ignores it


def test_our_route_gives_a_confidence_and_checks_the_minimum(http, expected):
    answer = http.post("/v1/translate", json={"text": TEXTS}).json()["translations"]
    assert _close([t["confidence"] for t in answer], expected)
    low = http.post("/v1/translate", json={"text": TEXTS[0], "min_confidence": 1.0}).json()
    assert low["translations"][0]["text"] == TEXTS[0]
    assert low["translations"][0]["below_min_confidence"] is True
    assert http.post("/v1/translate", json={"text": "x", "min_confidence": 2}).status_code in (
        400,
        422,
    )
