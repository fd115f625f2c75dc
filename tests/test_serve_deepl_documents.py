"""DeepL's document API (``/v2/document``, its status and its result) over real loopback HTTP,
spoken by DeepL's own client (``deepl.Translator.translate_document``) against a real ``seq2seq
serve`` process: a text file, subtitles and a Word document come back byte for byte as
LibreTranslate's ``/translate_file`` translates them, with their structure read back
independently; the status moves queued, translating, done; the result is downloaded once; a
wrong key, an unknown id, another format and a corrupt file are refused in DeepL's shape."""

from __future__ import annotations

import re
import time
import zipfile
from io import BytesIO
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import httpx
import pytest

pytest.importorskip("fastapi")
deepl = pytest.importorskip("deepl")
pytestmark = [pytest.mark.slow, pytest.mark.serial]

OFFICE = Path(__file__).parent / "data" / "office"
WORD = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
SENTENCES = ["I will buy apples today.", "She can see the book tomorrow.", "We should eat."]
TEXT = "\n".join(SENTENCES * 2) + "\n"
SUBTITLES = "".join(
    f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n{sentence}\n\n"
    for i, sentence in enumerate(SENTENCES, 1)
)
ORDER = ["queued", "translating", "done"]


@pytest.fixture
def client(translation_server, monkeypatch):
    """DeepL's client of the server; it polls a document's status every 5 seconds, shortened
    here to 0.1 (its only change)."""
    fast = SimpleNamespace(time=time.time, sleep=lambda seconds: time.sleep(min(seconds, 0.1)))
    monkeypatch.setattr(deepl.translator, "time", fast)
    return deepl.Translator("any-key", server_url=translation_server.url)


def translate_file(http, name: str, content: bytes) -> bytes:
    """The same file through LibreTranslate's /translate_file, as reference."""
    files = {"file": (name, content)}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=files)
    assert answer.status_code == 200, answer.text
    return httpx.get(answer.json()["translatedFileUrl"], timeout=60).content


def word_paragraphs(docx: bytes) -> list[str]:
    """Each w:p's text in word/document.xml, read by ElementTree."""
    with zipfile.ZipFile(BytesIO(docx)) as archive:
        root = ElementTree.fromstring(archive.read("word/document.xml"))
    return ["".join(t.text or "" for t in p.iter(f"{WORD}t")) for p in root.iter(f"{WORD}p")]


def cues(srt: str) -> list[tuple[str, str]]:
    """(number and timing, text) of each cue."""
    blocks = [block.split("\n", 2) for block in srt.strip().split("\n\n")]
    return [(f"{number} {timing}", text) for number, timing, text in blocks]


def usage(http) -> int:
    return http.get("/v2/usage").json()["character_count"]


def structure_kept(name: str, source: bytes, translated: bytes) -> None:
    """The same paragraphs, lines or cues, each with its text changed."""
    if name.endswith(".docx"):
        before, after = word_paragraphs(source), word_paragraphs(translated)
    elif name.endswith(".srt"):
        before, after = cues(source.decode()), cues(translated.decode())
        assert [cue[0] for cue in after] == [cue[0] for cue in before]  # numbers, timings
    else:
        before, after = source.decode().split("\n"), translated.decode().split("\n")
    assert len(after) == len(before) and after != before
    assert all(new != old for old, new in zip(before, after, strict=True) if str(old).strip())


DOCUMENTS = {
    "notes.txt": TEXT.encode(),
    "film.srt": SUBTITLES.encode(),
    "report.docx": (OFFICE / "python-docx--par-hlink-frags.docx").read_bytes(),
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_translate_document_gives_translate_files_document(client, http, name, tmp_path):
    source = DOCUMENTS[name]
    (tmp_path / name).write_bytes(source)
    before = usage(http)
    output = BytesIO()
    with open(tmp_path / name, "rb") as document:  # named by its file, as the client sends it
        status = client.translate_document(document, output, target_lang="ZH")
    assert status.done and status.ok
    assert output.getvalue() == translate_file(http, name, source)
    structure_kept(name, source, output.getvalue())
    assert status.billed_characters > 0 and usage(http) - before == status.billed_characters
    if name == "notes.txt":  # a line's characters, its newline not among them
        assert status.billed_characters == len(TEXT) - TEXT.count("\n")


def test_the_client_writes_a_file_by_path(client, tmp_path):
    source, output = tmp_path / "film.srt", tmp_path / "film.zh.srt"
    source.write_text(SUBTITLES, encoding="utf-8")
    client.translate_document_from_filepath(source, output, target_lang="ZH-HANS")
    structure_kept("film.srt", source.read_bytes(), output.read_bytes())


def upload(http, name: str, content: bytes, **fields) -> httpx.Response:
    data = {"target_lang": "ZH", **fields}
    return http.post("/v2/document", data=data, files={"file": (name, content)})


def test_status_moves_forward_and_the_result_is_downloaded_once(http):
    lines = [f"{sentence} ({n})" for n in range(60) for sentence in SENTENCES]
    handle = upload(http, "long.txt", "\n".join(lines).encode()).json()
    assert set(handle) == {"document_id", "document_key"}
    assert re.fullmatch("[0-9A-F]{32}", handle["document_id"])
    path, key = f"/v2/document/{handle['document_id']}", {"document_key": handle["document_key"]}
    early = http.post(f"{path}/result", json=key)
    assert early.status_code == 503 and early.json()["message"].startswith("Document not ready")
    seen = []
    for _ in range(600):
        answer = http.post(path, json=key).json()
        assert answer["document_id"] == handle["document_id"]
        seen.append(answer["status"])
        if answer["status"] == "translating" and "seconds_remaining" in answer:
            assert answer["seconds_remaining"] >= 1
        if answer["status"] == "done":
            break
        time.sleep(0.05)
    assert seen[0] in ("queued", "translating") and seen[-1] == "done"
    assert [ORDER.index(status) for status in seen] == sorted(ORDER.index(s) for s in seen)
    assert answer["billed_characters"] == sum(map(len, lines))
    result = http.post(f"{path}/result", json=key)
    assert result.status_code == 200 and len(result.text.split("\n")) == len(lines)
    assert "filename*=UTF-8''long.txt" in result.headers["content-disposition"]
    for again in (http.post(f"{path}/result", json=key), http.post(path, json=key)):
        assert again.status_code == 404 and "downloaded already" in again.json()["message"]


def test_the_filename_field_names_a_file_its_part_does_not(http):
    handle = upload(http, "blob", SUBTITLES.encode(), filename="film.srt").json()
    key = {"document_key": handle["document_key"]}
    path = f"/v2/document/{handle['document_id']}"
    deadline = time.monotonic() + 120
    while http.post(path, json=key).json()["status"] != "done":
        assert time.monotonic() < deadline, "not translated in 2 minutes"
        time.sleep(0.05)
    result = http.post(f"{path}/result", json=key)
    assert result.headers["content-type"] == "application/x-subrip; charset=utf-8"
    structure_kept("film.srt", SUBTITLES.encode(), result.content)


def test_a_wrong_key_or_an_unknown_id_is_refused(client, http):
    handle = client.translate_document_upload(b"We should eat.", target_lang="ZH", filename="a.txt")
    wrong = deepl.DocumentHandle(handle.document_id, "0" * 64)
    with pytest.raises(deepl.AuthorizationException, match="Invalid document key"):
        client.translate_document_get_status(wrong)
    with pytest.raises(deepl.DeepLException, match="Not found"):
        client.translate_document_get_status(deepl.DocumentHandle("F" * 32, handle.document_key))
    path = f"/v2/document/{handle.document_id}"
    assert http.post(path, json={}).json() == {"message": "Parameter 'document_key' not specified."}
    assert client.translate_document_wait_until_done(handle).done  # the right key still works


@pytest.mark.parametrize(
    ("name", "content", "fields", "message"),
    [
        ("scan.pdf", b"%PDF-1.4\n", {}, "file format not supported (.pdf; supported: .txt"),
        ("broken.docx", b"PK\x03\x04 not a zip", {}, "broken.docx"),
        ("page.html", b"<p>Hi <b", {}, "page.html"),
        ("a.txt", b"Hi.", {"target_lang": "DE"}, "Value for 'target_lang' not supported: DE"),
        ("a.txt", b"Hi.", {"output_format": "pdf"}, "Value for 'output_format' not supported"),
    ],
)
def test_a_bad_document_is_a_400_in_deepls_shape(http, client, name, content, fields, message):
    answer = upload(http, name, content, **fields)
    assert answer.status_code == 400 and set(answer.json()) == {"message"}
    assert message in answer.json()["message"] and "\n" not in answer.json()["message"]
    if not fields:  # the client raises it at upload, before any polling
        with pytest.raises(deepl.DeepLException, match="Bad request"):
            client.translate_document_upload(content, target_lang="ZH", filename=name)
