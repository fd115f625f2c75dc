"""Traditional Chinese over real loopback HTTP, with the real clients: LibreTranslate's
/translate (libretranslatepy), /languages and /translate_file, DeepL's /v2/translate and
/v2/languages (deepl), and our /v1/translate; each route's zh-Hant, zh-TW and zh-HK answers
are exactly OpenCC's conversion of its own Simplified answer for the same request."""

from __future__ import annotations

import json
import urllib.error

import httpx
import pytest

from seq2seq.formats.chinese_script import convert

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SENTENCES = ["I will buy apples today.", "She can see the book tomorrow. We should eat."]
# LibreTranslate's and our own requests take an inline glossary (our extension): Simplified
# terms put characters each conversion changes into the tiny model's outputs.
GLOSSARY = {"apples": "苹果", "book": "软件"}
TARGETS = {"zt": "zh-Hant", "zh-Hant": "zh-Hant", "zh-TW": "zh-TW", "zh_hk": "zh-HK"}


def test_libretranslate_targets_with_its_own_client(translation_server):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(translation_server.url)
    languages = {item["code"]: item for item in client.languages()}
    assert {"zh", "zt"} <= set(languages["en"]["targets"])
    assert languages["zt"]["name"] == "Chinese (traditional)"
    simplified = [client.translate(s, "en", "zh") for s in SENTENCES]
    for code, tag in TARGETS.items():
        assert [client.translate(s, "en", code) for s in SENTENCES] == [
            convert(text, tag) for text in simplified
        ], code
    with pytest.raises(urllib.error.HTTPError) as caught:
        client.translate(SENTENCES[0], "en", "zh-XX")
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["error"].startswith("zh-XX is not supported")


def test_libretranslate_glossary_html_and_alternatives_are_converted(http):
    def answer(target: str, **args) -> dict:
        body = {"q": SENTENCES, "source": "en", "target": target, "glossary": GLOSSARY, **args}
        response = http.post("/translate", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    simplified = answer("zh", alternatives=2)
    for code, tag in TARGETS.items():
        converted = answer(code, alternatives=2)
        expected = [convert(text, tag) for text in simplified["translatedText"]]
        assert converted["translatedText"] == expected
        assert converted["alternatives"] == [
            [convert(t, tag) for t in texts] for texts in simplified["alternatives"]
        ]
        assert converted != simplified
    page = '<html lang="en"><p>I will buy <b>apples</b> today.</p></html>'
    [html] = answer("zt", q=[page], format="html")["translatedText"]
    assert html.startswith('<html lang="zh-Hant"><p>') and "蘋" in html and "<b>" in html


def test_translate_file_takes_the_target(http):
    def translated(target: str, name: str, body: str) -> str:
        upload = {"file": (name, body.encode(), "application/octet-stream")}
        answer = http.post("/translate_file", data={"source": "en", "target": target}, files=upload)
        assert answer.status_code == 200, answer.text
        return httpx.get(answer.json()["translatedFileUrl"], timeout=60).content.decode("utf-8")

    text = "\n".join(SENTENCES) + "\n"
    simplified = translated("zh", "notes.txt", text)
    for code, tag in TARGETS.items():
        assert translated(code, "notes.txt", text) == convert(simplified, tag)
    page = '<!DOCTYPE html>\n<html lang="en"><body><p>We should eat.</p></body></html>\n'
    assert '<html lang="zh-TW">' in translated("zh-TW", "page.html", page)
    upload = {"file": ("notes.txt", b"Hello.", "text/plain")}
    refused = http.post("/translate_file", data={"source": "en", "target": "fr"}, files=upload)
    assert refused.status_code == 400 and "fr is not supported" in refused.json()["error"]


def test_deepl_zh_hant_with_its_own_client(translation_server):
    deepl = pytest.importorskip("deepl")
    translator = deepl.Translator("any-key", server_url=translation_server.url)
    targets = [(lang.code, lang.name) for lang in translator.get_target_languages()]
    assert ("ZH-HANT", "Chinese (traditional)") in targets
    simplified = [r.text for r in translator.translate_text(SENTENCES, target_lang="ZH")]
    converted = translator.translate_text(SENTENCES, target_lang="ZH-HANT")
    assert [r.text for r in converted] == [convert(text, "zh-Hant") for text in simplified]
    # A glossary (EN to ZH, as DeepL keeps them) serves ZH-HANT: a term given in Traditional is
    # written as given, one given in Simplified in Traditional.
    made = translator.create_glossary("terms", "EN", "ZH", {"apples": "蘋果", "book": "软件"})
    try:
        [found] = translator.translate_text(
            ["I will buy apples and the book."],
            source_lang="EN",
            target_lang="ZH-HANT",
            glossary=made,
        )
        assert "蘋果" in found.text and "軟件" in found.text
    finally:
        translator.delete_glossary(made)
    with pytest.raises(deepl.DeepLException) as caught:
        translator.translate_text(SENTENCES[0], target_lang="ZH-TW")
    assert caught.value.http_status_code == 400 and "ZH-TW" in str(caught.value)


def test_our_v1_translate_takes_a_target(http):
    def texts(target: str, **args) -> list[str]:
        body = {"text": SENTENCES, "target": target, "glossary": GLOSSARY, **args}
        response = http.post("/v1/translate", json=body)
        assert response.status_code == 200, response.text
        return [item["text"] for item in response.json()["translations"]]

    simplified = texts("zh-Hans")
    assert texts("zh-TW") == [convert(text, "zh-TW") for text in simplified]
    attention = {"glossary": None, "return_attention": True}
    assert texts("zt", **attention) == [convert(t, "zh-Hant") for t in texts("zh", **attention)]
    refused = http.post("/v1/translate", json={"text": "Hi.", "target": "klingon"})
    assert refused.status_code == 400 and "unknown target 'klingon'" in refused.json()["error"]
