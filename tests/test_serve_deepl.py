"""DeepL's API over real loopback HTTP, spoken by DeepL's own client (``pip install deepl``):
text translation (as LibreTranslate's /translate gives it, HTML, split_sentences, glossaries),
glossaries v2 and v3 (create from a dict and from CSV, list, get, entries, delete), languages,
usage, keys, DeepL's error statuses, and glossaries kept in a directory across a restart.

The servers run in this process (uvicorn in a thread, on a 127.0.0.1 socket bound as ``seq2seq
serve`` binds it) so that settings ``seq2seq serve`` has no option for yet (``glossary_dir``)
can be given, and the model is loaded once for the module.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

pytest.importorskip("fastapi")
deepl = pytest.importorskip("deepl")
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SENTENCES = [
    "My teacher will buy apples today.",
    "She can see the book tomorrow.",
    "We should eat.",
]


@contextmanager
def serving(served, **settings):
    """``create_app(served, ServerSettings(**settings))`` under uvicorn on a free port; yields
    its base URL, and shuts it down (the worker finishing its work) on exit."""
    import uvicorn

    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.server import bind

    app = create_app(served, ServerSettings(**settings))
    listener = bind("127.0.0.1", 0)
    listener.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(60)
        listener.close()


@pytest.fixture(scope="module")
def served(translation_checkpoint):
    from seq2seq.serve.served_model import ServedModel

    return ServedModel.load(translation_checkpoint)


@pytest.fixture(scope="module")
def url(served, tmp_path_factory):
    with serving(served, glossary_dir=tmp_path_factory.mktemp("glossaries")) as address:
        yield address


@pytest.fixture(scope="module")
def translator(url):
    return deepl.Translator("any-key", server_url=url)


def test_glossaries_round_trip_through_the_client(translator):
    entries = {"teacher": "导师", "machine learning": "机器学习"}
    made = translator.create_glossary("terms", "EN", "ZH", entries)
    assert (made.name, made.ready, made.source_lang, made.target_lang, made.entry_count) == (
        "terms",
        True,
        "EN",
        "ZH",
        2,
    )
    assert made.creation_time.tzinfo is not None and len(made.glossary_id) == 36
    from_csv = translator.create_glossary_from_csv(
        "from csv", "en", "zh", 'apple,苹果,en,zh\n"book, old",旧书\n'
    )
    assert from_csv.entry_count == 2
    listed = {g.glossary_id: g.name for g in translator.list_glossaries()}
    assert listed[made.glossary_id] == "terms" and listed[from_csv.glossary_id] == "from csv"
    assert translator.get_glossary(made.glossary_id).entry_count == 2
    assert translator.get_glossary_entries(made) == entries
    assert translator.get_glossary_entries(from_csv.glossary_id) == {
        "apple": "苹果",
        "book, old": "旧书",
    }
    translator.delete_glossary(from_csv)
    with pytest.raises(deepl.GlossaryNotFoundException) as caught:
        translator.get_glossary(from_csv.glossary_id)
    assert caught.value.http_status_code == 404
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.delete_glossary(from_csv.glossary_id)
    translator.delete_glossary(made)


def test_glossary_answers_have_deepl_shapes(http):
    made = http.post(
        "/v2/glossaries",
        json={
            "name": "g",
            "source_lang": "en",
            "target_lang": "zh",
            "entries": "teacher\t导师\n",
            "entries_format": "tsv",
        },
    )
    assert made.status_code == 201
    info = made.json()
    assert set(info) == {
        "glossary_id",
        "name",
        "ready",
        "source_lang",
        "target_lang",
        "creation_time",
        "entry_count",
    }
    assert (info["source_lang"], info["target_lang"]) == ("en", "zh")
    assert info["creation_time"].endswith("Z")
    entries = http.get(
        f"/v2/glossaries/{info['glossary_id']}/entries",
        headers={"accept": "text/tab-separated-values"},
    )
    assert entries.headers["content-type"].startswith("text/tab-separated-values")
    assert entries.text == "teacher\t导师"
    form = http.post(
        "/v2/glossaries",
        data={
            "name": "f",
            "source_lang": "EN",
            "target_lang": "ZH-HANS",
            "entries": "a,b",
            "entries_format": "csv",
        },
    )
    assert form.status_code == 201 and form.json()["entry_count"] == 1
    for glossary_id in (info["glossary_id"], form.json()["glossary_id"]):
        assert http.delete(f"/v2/glossaries/{glossary_id}").status_code == 204
    assert http.get("/v2/glossaries/no-such-id").json() == {
        "message": "Glossary not found: no-such-id"
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            {"entries": "teacher\t导师\nstudent\n"},
            400,
            "entries:2: expected 2 tab-separated fields (source, target), found 1",
        ),
        (
            {"entries": "teacher\t导师\nTeacher\t老师\n"},
            400,
            "entries:2: duplicate source term 'Teacher' (first on line 1)",
        ),
        ({"entries": 'a,"x\ty"', "entries_format": "csv"}, 400, "holds a tab or a line break"),
        ({"entries": ""}, 400, "no glossary entries"),
        ({"entries": "a\tb", "entries_format": "xlsx"}, 400, "'entries_format' not supported"),
        (
            {"entries": "a\tb", "target_lang": "de"},
            400,
            "Unsupported glossary language pair: en to de",
        ),
        ({"entries": "a\tb", "name": ""}, 400, "needs a 'name'"),
        (
            {"entries": "".join(f"t{i}\tx\n" for i in range(10_001))},
            413,
            "over this server's limit of 10000",
        ),
        ({"entries": "a\t" + "b" * 1_000_000}, 413, "exceed 1000000 bytes"),
    ],
)
def test_bad_glossaries_are_refused_naming_the_line(http, body, status, message):
    answer = http.post(
        "/v2/glossaries", json={"name": "bad", "source_lang": "en", "target_lang": "zh", **body}
    )
    assert answer.status_code == status
    assert list(answer.json()) == ["message"] and message in answer.json()["message"]


def test_the_client_raises_deepl_exceptions_for_what_the_server_refuses(translator):
    with pytest.raises(deepl.DeepLException) as caught:
        translator.translate_text("Hello.", target_lang="DE")
    assert caught.value.http_status_code == 400 and "target_lang" in str(caught.value)
    with pytest.raises(deepl.DeepLException) as caught:
        translator.create_glossary("g", "EN", "FR", {"a": "b"})
    assert caught.value.http_status_code == 400 and "EN to FR" in str(caught.value)
    with pytest.raises(deepl.DeepLException) as caught:
        translator.translate_text(
            "Hello.",
            source_lang="EN",
            target_lang="ZH",
            glossary="4d4b5c62-0000-4000-8000-000000000000",
        )
    assert caught.value.http_status_code == 404 and "Glossary not found" in str(caught.value)
    with pytest.raises(deepl.DeepLException) as caught:
        translator.translate_text("<p>Hi</p>", target_lang="ZH", tag_handling="xml")
    assert caught.value.http_status_code == 400 and "'xml' is not supported" in str(caught.value)
    with pytest.raises(deepl.DeepLException) as caught:
        translator.translate_text("Hi.", target_lang="ZH", formality="more")
    assert caught.value.http_status_code == 400 and "formality" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"target_lang": "ZH"}, "Parameter 'text' not specified."),
        ({"text": ["a"]}, "Parameter 'target_lang' not specified."),
        ({"text": ["a"], "target_lang": "ZH-TW"}, "not supported: ZH-TW"),
        (
            {"text": ["a"], "target_lang": "ZH", "source_lang": "DE"},
            "'source_lang' not supported: DE",
        ),
        ({"text": [1], "target_lang": "ZH"}, "'text' must be an array of strings"),
        ({"text": ["a"], "target_lang": "ZH", "glossary_id": "x"}, "requires the 'source_lang'"),
        ({"text": ["a"], "target_lang": "ZH", "split_sentences": "2"}, "'split_sentences'"),
        (
            {"text": ["a"], "target_lang": "ZH", "source_lang": "EN", "glossary_ids": ["x", "y"]},
            "one glossary per request",
        ),
        ({"text": ["a"], "target_lang": "ZH", "ignore_tags": ["x"]}, "ignore_tags"),
        ({"text": ["a"] * 1001, "target_lang": "ZH"}, "exceeds batch limit (1000)"),
    ],
)
def test_bad_translate_requests_are_400s_in_deepls_shape(http, body, message):
    answer = http.post("/v2/translate", json=body)
    assert answer.status_code == 400
    assert list(answer.json()) == ["message"] and message in answer.json()["message"]


def test_translations_are_the_libretranslate_ones(translator, http):
    text = " ".join(SENTENCES[:2])
    libre = http.post(
        "/translate", json={"q": [text, SENTENCES[2]], "source": "en", "target": "zh"}
    ).json()["translatedText"]
    results = translator.translate_text([text, SENTENCES[2]], target_lang="ZH")
    assert [r.text for r in results] == libre
    assert [r.detected_source_lang for r in results] == ["EN", "EN"]
    assert [r.billed_characters for r in results] == [len(text), len(SENTENCES[2])]
    one = translator.translate_text(SENTENCES[2], source_lang="EN", target_lang="zh-Hans")
    assert one.text == libre[1]  # a single string answers a single result
    form = http.post(
        "/v2/translate", data={"text": [text, SENTENCES[2]], "target_lang": "ZH", "auth_key": "k"}
    )
    answer = [
        {k: v for k, v in t.items() if k != "confidence"} for t in form.json()["translations"]
    ]
    assert answer == [{"detected_source_language": "EN", "text": t} for t in libre]


def test_a_sentence_translated_in_windows_is_marked_and_the_client_reads_past_it(translator, http):
    long_line = "apples " * 120  # beyond the model's positions, with no clause punctuation
    raw = http.post("/v2/translate", json={"text": [long_line, "Hi."], "target_lang": "ZH"})
    windowed, short = raw.json()["translations"]
    assert windowed["windowed"] is True and "windowed" not in short
    assert translator.translate_text(long_line, target_lang="ZH").text == windowed["text"]


def test_tag_handling_html_keeps_the_markup(translator, http):
    page = f"<p>{SENTENCES[0]} <b>{SENTENCES[1]}</b></p>"
    libre = http.post(
        "/translate", json={"q": page, "source": "en", "target": "zh", "format": "html"}
    ).json()["translatedText"]
    result = translator.translate_text(page, target_lang="ZH", tag_handling="html")
    assert result.text == libre and result.text.startswith("<p>")
    assert result.text.count("<b>") == 1 and result.text.endswith("</b></p>")


def test_split_sentences_0_takes_each_line_whole_and_nonewlines_joins_lines(translator, http):
    text = f"{SENTENCES[0]} {SENTENCES[1]}"
    whole = http.post("/v1/translate", json={"text": text, "split": False}).json()
    result = translator.translate_text(text, target_lang="ZH", split_sentences="0")
    assert result.text == whole["translations"][0]["text"]
    lines = translator.translate_text(
        f"{SENTENCES[0]}\n{SENTENCES[1]}", target_lang="ZH", split_sentences="nonewlines"
    )
    assert lines.text == translator.translate_text(text, target_lang="ZH").text


def test_a_glossary_term_is_forced_or_reported(translator, http):
    """Each term that applies is in the translation or named in ``glossary_terms_not_met``
    (our addition, which the client reads past); a short term the untrained model never
    writes is forced in, so the glossary reaches the search."""
    made = translator.create_glossary("forced", "EN", "ZH", {"apples": "苹果", "teacher": "导师"})
    try:
        plain = translator.translate_text(SENTENCES, target_lang="ZH")
        assert "苹果" not in plain[0].text
        result = translator.translate_text(
            SENTENCES[0], source_lang="EN", target_lang="ZH", glossary=made
        )
        assert "苹果" in result.text
        body = {
            "text": SENTENCES,
            "source_lang": "EN",
            "target_lang": "ZH",
            "glossary_id": made.glossary_id,
        }
        with_terms, *without = http.post("/v2/translate", json=body).json()["translations"]
        assert with_terms["text"] == result.text
        not_met = with_terms.get("glossary_terms_not_met", [])
        assert ("导师" in result.text) != ("teacher" in not_met) and "apples" not in not_met
        assert [item["text"] for item in without] == [r.text for r in plain[1:]]
        assert all("glossary_terms_not_met" not in item for item in without)  # no term applies
        with_info = translator.translate_text_with_glossary(SENTENCES[0], made)
        assert with_info.text == result.text
    finally:
        translator.delete_glossary(made)


def test_languages_glossary_pairs_and_usage(translator, http):
    assert [(lang.code, lang.name) for lang in translator.get_source_languages()] == [
        ("EN", "English")
    ]
    targets = translator.get_target_languages()  # a GET with a form body: type=target
    assert [(lang.code, lang.supports_formality) for lang in targets] == [
        ("ZH", False),
        ("ZH-HANS", False),
        ("ZH-HANT", False),
    ]
    assert [(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()] == [
        ("en", "zh")
    ]
    before = translator.get_usage().character.count
    translator.translate_text(["Hello.", "Good night."], target_lang="ZH")
    usage = translator.get_usage()
    assert usage.character.count == before + len("Hello.") + len("Good night.")
    assert usage.character.valid and not usage.any_limit_reached
    assert http.post("/v2/languages", data={"type": "target"}).json()[0]["language"] == "ZH"
    assert http.get("/v2/languages", params={"type": "neither"}).status_code == 400


def test_multilingual_glossaries_v3_through_the_client(url):
    from deepl.api_data import MultilingualGlossaryDictionaryEntries

    client = deepl.DeepLClient("any-key", server_url=url)
    entries = MultilingualGlossaryDictionaryEntries("EN", "ZH", {"teacher": "导师"})
    made = client.create_multilingual_glossary("v3", [entries])
    [dictionary] = made.dictionaries
    assert (dictionary.source_lang, dictionary.target_lang, dictionary.entry_count) == (
        "EN",
        "ZH",
        1,
    )
    assert client.get_multilingual_glossary(made.glossary_id).name == "v3"
    assert made.glossary_id in {g.glossary_id for g in client.list_multilingual_glossaries()}
    assert client.get_glossary(made.glossary_id).entry_count == 1  # the same glossary in v2
    renamed = client.update_multilingual_glossary_name(made, "renamed")
    assert renamed.name == "renamed"
    more = MultilingualGlossaryDictionaryEntries("en", "zh", {"Teacher": "老师", "apple": "苹果"})
    merged = client.update_multilingual_glossary_dictionary(made, more)
    assert merged.dictionaries[0].entry_count == 2  # "Teacher" replaced "teacher"
    [got] = client.get_multilingual_glossary_entries(made, "EN", "ZH").dictionaries
    assert got.entries == "Teacher\t老师\napple\t苹果"  # DeepL answers TSV text here
    replaced = client.replace_multilingual_glossary_dictionary(made, entries)
    assert replaced.entry_count == 1
    client.delete_multilingual_glossary_dictionary(made, source_lang="EN", target_lang="ZH")
    assert client.get_multilingual_glossary(made.glossary_id).dictionaries == []
    with pytest.raises(deepl.DeepLException):
        client.create_multilingual_glossary("two", [entries, entries])
    client.delete_multilingual_glossary(made)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(made.glossary_id)


def test_keys_are_checked_when_the_server_has_them(served):
    with serving(served, api_keys=frozenset({"secret"})) as address:
        good = deepl.Translator("secret", server_url=address)
        assert good.translate_text("Hello.", target_lang="ZH").detected_source_lang == "EN"
        with pytest.raises(deepl.AuthorizationException) as caught:
            deepl.Translator("guess", server_url=address).list_glossaries()
        assert caught.value.http_status_code == 403 and "Invalid auth key" in str(caught.value)
        with httpx.Client(base_url=address, timeout=60) as http:
            missing = http.get("/v2/usage")
            assert missing.status_code == 403 and "Missing auth key" in missing.json()["message"]
            old_style = http.post(
                "/v2/translate", data={"text": "Hi.", "target_lang": "ZH", "auth_key": "secret"}
            )
            assert old_style.status_code == 200
            assert http.post(
                "/translate", json={"q": "a", "source": "en", "target": "zh"}
            ).json() == {"error": "Please provide an API key"}


def test_glossaries_in_a_directory_survive_a_restart(served, tmp_path, caplog):
    (tmp_path / "0b5c1bd0-0000-4000-8000-000000000000.json").write_text('{"id": "0b5c')
    (tmp_path / "notes.txt").write_text("not a glossary")
    with caplog.at_level(logging.WARNING, logger="seq2seq.serve"):
        with serving(served, glossary_dir=tmp_path) as address:
            client = deepl.Translator("k", server_url=address)
            kept = client.create_glossary("kept", "EN", "ZH", {"teacher": "导师"})
            gone = client.create_glossary("gone", "EN", "ZH", {"apple": "苹果"})
            client.delete_glossary(gone)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("skipping glossary file") and "0b5c1bd0" in warning
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == sorted(
        [f"{kept.glossary_id}.json", "notes.txt", "0b5c1bd0-0000-4000-8000-000000000000.json"]
    )  # no temporary file
    saved = json.loads((tmp_path / f"{kept.glossary_id}.json").read_text(encoding="utf-8"))
    assert saved["entries"] == "teacher\t导师" and saved["name"] == "kept"
    with serving(served, glossary_dir=tmp_path) as address:
        client = deepl.Translator("k", server_url=address)
        assert [g.glossary_id for g in client.list_glossaries()] == [kept.glossary_id]
        again = client.get_glossary(kept.glossary_id)
        assert (again.name, again.creation_time) == ("kept", kept.creation_time)
        assert client.get_glossary_entries(kept) == {"teacher": "导师"}


def test_the_store_writes_atomically_and_merges_by_words(tmp_path, monkeypatch):
    import os

    from seq2seq.inference.glossary import Glossary, Term
    from seq2seq.serve.glossaries import GlossaryStore, merged

    store = GlossaryStore(tmp_path / "made")
    stored = store.create("a", Glossary.parse("teacher\t导师"))

    def crash(source, target):  # noqa: ANN001
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.update(stored.glossary_id, name="b")
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "made").iterdir()] == [f"{stored.glossary_id}.json"]
    assert store.get(stored.glossary_id).name == "a"  # the old file, and the old glossary
    assert GlossaryStore(tmp_path / "made").get(stored.glossary_id).name == "a"
    old = Glossary([Term("machine learning", "机器学习"), Term("teacher", "导师")])
    new = Glossary([Term("Machine  Learning", "ML"), Term("machine", "机器")])
    assert [t.target for t in merged(old, new)] == ["导师", "ML", "机器"]


def test_a_language_model_server_refuses_translation(lm_checkpoint):
    from seq2seq.serve.served_model import ServedModel

    with serving(ServedModel.load(lm_checkpoint)) as address:
        client = deepl.Translator("k", server_url=address)
        with pytest.raises(deepl.DeepLException) as caught:
            client.translate_text("Hello.", target_lang="ZH")
        assert caught.value.http_status_code == 400 and "language model" in str(caught.value)
        assert client.get_target_languages() == []


def test_seq2seq_serve_keeps_glossaries_in_its_glossary_dir(translation_checkpoint, tmp_path):
    """The command's --glossary-dir, end to end: a glossary made through the client is a file
    there, and the next server started on the directory serves it."""
    from tests.serving import running_server

    directory = tmp_path / "glossaries"  # made by the server
    with running_server(translation_checkpoint, "--glossary-dir", str(directory)) as server:
        made = deepl.Translator("k", server_url=server.url).create_glossary(
            "kept", "EN", "ZH", {"teacher": "导师"}
        )
    assert [path.name for path in directory.iterdir()] == [f"{made.glossary_id}.json"]
    with running_server(translation_checkpoint, "--glossary-dir", str(directory)) as server:
        client = deepl.Translator("k", server_url=server.url)
        assert client.get_glossary_entries(made.glossary_id) == {"teacher": "导师"}
