"""The web page of ``seq2seq serve`` (``seq2seq/serve/static/index.html``) in a real browser:
Debian's headless Chromium driven by selenium, against servers of tiny untrained checkpoints
(gibberish, but deterministic), each result checked against the server's own API.

``SEQ2SEQ_SCREENSHOT=PATH`` saves the translate test's screenshot there (the README's
``docs/serve.png``); ``SEQ2SEQ_SERVE_CHECKPOINT=CKPT`` serves that checkpoint in the translate
test instead of the tiny one, so the picture shows a trained model::

    SEQ2SEQ_SERVE_CHECKPOINT=runs/NAME/checkpoints/last.ckpt SEQ2SEQ_SCREENSHOT=docs/serve.png \\
        python -m pytest tests/test_serve_page.py -q -k translate
"""

from __future__ import annotations

import os
import shutil
from contextlib import ExitStack
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.serial]

BROWSER, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (BROWSER and DRIVER):
    pytest.skip(
        "the page test needs Debian's chromium and chromium-driver (chromedriver) on PATH",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="the page test needs selenium")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SENTENCE = "I like to drink tea in the morning."
SECOND = "Where is the station?"
WAIT = 30.0  # seconds for an answer (the tiny models answer in well under one)


@pytest.fixture(scope="module")
def browser():
    options = Options()
    options.binary_location = BROWSER
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1200,900",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    # An explicit driver path: selenium-manager never runs (it would try to download one).
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    yield driver
    driver.quit()


def open_page(driver, url: str) -> None:
    driver.get(url + "/")
    wait_for(driver, "ready")


def wait_for(driver, *states: str, timeout: float = WAIT, line: str = "status") -> str:
    """Wait until the status line's (or the file box's, ``line="file-status"``) ``data-state``
    is one of ``states``; returns it."""

    def state(_) -> str | bool:
        found = driver.find_element(By.ID, line).get_attribute("data-state")
        return found if found in states else False

    return WebDriverWait(driver, timeout).until(state, f"the page never reached {states}")


def text_of(driver, element_id: str) -> str:
    """The element's text exactly as set (``.text`` would reflow the white space)."""
    return driver.find_element(By.ID, element_id).get_property("textContent")


def type_into(driver, element_id: str, text: str) -> None:
    element = driver.find_element(By.ID, element_id)
    element.clear()
    element.send_keys(text)


def translate_api(url: str, texts: list[str], beam: int) -> list[dict]:
    body = {"text": texts, "beam_size": beam, "return_attention": True}
    response = httpx.post(url + "/v1/translate", json=body, timeout=WAIT)
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def translate_file_api(url: str, path: Path) -> httpx.Response:
    """POST /translate_file as the page sends it; the answer, or the download on success."""
    form = {"source": "en", "target": "zh"}
    answer = httpx.post(
        url + "/translate_file",
        data=form,
        timeout=WAIT,
        files={"file": (path.name, path.read_bytes())},
    )
    if answer.status_code != 200:
        return answer
    return httpx.get(answer.json()["translatedFileUrl"], timeout=WAIT)


def translate_file_in_page(driver, path: Path) -> str:
    """Choose ``path`` in the file box and translate it; the file status line's final state."""
    driver.find_element(By.ID, "file-input").send_keys(str(path))
    driver.find_element(By.ID, "file-button").click()
    return wait_for(driver, "done", "error", line="file-status")


def test_translate_page_matches_the_api(browser, request, tmp_path):
    with ExitStack() as stack:
        if checkpoint := os.environ.get("SEQ2SEQ_SERVE_CHECKPOINT"):
            from tests.serving import running_server

            server = stack.enter_context(running_server(checkpoint))
        else:
            server = request.getfixturevalue("translation_server")
        open_page(browser, server.url)
        settings = httpx.get(server.url + "/frontend/settings").json()
        assert text_of(browser, "meta") == (
            f"{settings['model']} · {settings['kind']} · {settings['engine']} engine"
        )
        assert browser.find_element(By.ID, "beam").get_attribute("value") == str(
            settings["beamSize"]
        )
        assert not browser.find_element(By.ID, "api_key").is_displayed()  # no --api-keys
        assert not browser.find_element(By.ID, "prompt").is_displayed()

        # One sentence: the API's best translation, and its attention as the heatmap.
        beam = settings["beamSize"]
        type_into(browser, "source", SENTENCE)
        browser.find_element(By.ID, "translate").click()
        assert wait_for(browser, "done", "error") == "done", text_of(browser, "status")
        (expected,) = translate_api(server.url, [SENTENCE], beam)
        assert text_of(browser, "translation") == expected["text"]
        attention = expected["attention"]
        rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap g.heat-row")
        assert len(rows) == len(attention["target"])  # one per output token, eos included
        for row in rows:
            assert len(row.find_elements(By.TAG_NAME, "rect")) == len(attention["source"])
        labels = browser.find_elements(By.CSS_SELECTOR, "#heatmap .heat-source text")
        assert [label.get_property("textContent") for label in labels] == [
            piece.replace("\u2581", "") or "\u2423" for piece in attention["source"]
        ]

        ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
        path = Path(os.environ.get("SEQ2SEQ_SCREENSHOT") or tmp_path / "serve.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 10_000

        # Two lines (sent with Ctrl+Enter): each translated alone, shown one per line; the
        # heatmap is the first line's.
        type_into(browser, "source", f"{SECOND}\n{SENTENCE}")
        browser.find_element(By.ID, "source").send_keys(Keys.CONTROL, Keys.ENTER)
        assert wait_for(browser, "done", "error") == "done", text_of(browser, "status")
        first, second = translate_api(server.url, [SECOND, SENTENCE], beam)
        assert text_of(browser, "translation") == f"{first['text']}\n{second['text']}"
        rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap g.heat-row")
        assert len(rows) == len(first["attention"]["target"])
        assert text_of(browser, "heatmap-caption").startswith("Line 1 of 2")


def test_page_shows_server_errors(browser, translation_server):
    url = translation_server.url
    open_page(browser, url)
    type_into(browser, "source", SENTENCE)

    # A beam of 0: the server's validation message, shown as it is.
    type_into(browser, "beam", "0")
    browser.find_element(By.ID, "translate").click()
    assert wait_for(browser, "done", "error") == "error"
    body = {"text": [SENTENCE], "beam_size": 0}
    answer = httpx.post(url + "/v1/translate", json=body, timeout=WAIT)
    assert answer.status_code == 400
    assert text_of(browser, "status") == answer.json()["error"]
    assert "beam_size" in text_of(browser, "status")
    assert browser.find_element(By.ID, "translate").is_enabled()

    # Over the character limit (set as a paste would: typing 30,000 keys is slow).
    limit = httpx.get(url + "/frontend/settings").json()["charLimit"]
    long_text = "tea " * (limit // 4 + 1)
    type_into(browser, "beam", "2")
    browser.execute_script(
        "const source = document.getElementById('source');"
        "source.value = arguments[0];"
        "source.dispatchEvent(new Event('input'));",
        long_text,
    )
    assert "over" in browser.find_element(By.ID, "chars").get_attribute("class")
    browser.find_element(By.ID, "translate").click()
    assert wait_for(browser, "done", "error") == "error"
    answer = httpx.post(url + "/v1/translate", json={"text": [long_text]}, timeout=WAIT)
    assert answer.status_code == 400
    assert text_of(browser, "status") == answer.json()["error"]
    assert "exceeds text limit" in text_of(browser, "status")

    # The page still works afterwards.
    type_into(browser, "source", SENTENCE)
    browser.find_element(By.ID, "translate").click()
    assert wait_for(browser, "done", "error") == "done", text_of(browser, "status")
    assert text_of(browser, "translation") == translate_api(url, [SENTENCE], 2)[0]["text"]


def test_glossary_box_forces_terms_as_the_api_does(browser, translation_server):
    url = translation_server.url
    open_page(browser, url)
    browser.find_element(By.CSS_SELECTOR, "#glossary-box summary").click()
    type_into(browser, "source", f"{SENTENCE}\n{SECOND}")
    # Set as a paste would: typing a tab would move the focus on.
    browser.execute_script(
        "document.getElementById('glossary').value = arguments[0];", "tea = 苹果\nstation\t一本书"
    )
    type_into(browser, "beam", "2")
    browser.find_element(By.ID, "translate").click()
    assert wait_for(browser, "done", "error") == "done", text_of(browser, "status")
    body = {
        "text": [SENTENCE, SECOND],
        "beam_size": 2,
        "return_scores": True,
        "glossary": {"tea": "苹果", "station": "一本书"},
    }
    answer = httpx.post(url + "/v1/translate", json=body, timeout=WAIT).json()
    texts = [t["text"] for t in answer["translations"]]
    assert text_of(browser, "translation") == "\n".join(texts)
    assert "苹果" in texts[0] and "一本书" in texts[1]
    assert [t["glossary_terms_not_met"] for t in answer["translations"]] == [[], []]

    type_into(browser, "glossary", "tea = 苹果\nno separator here")
    browser.find_element(By.ID, "translate").click()
    assert wait_for(browser, "done", "error") == "error"
    assert text_of(browser, "status") == "Glossary line 2: write English = 中文"


SUBTITLES = (
    f"1\n00:00:01,000 --> 00:00:02,500\n{SENTENCE}\n\n2\n00:00:03,000 --> 00:00:04,000\n{SECOND}\n"
)
KEPT_LINES = (0, 1, 3, 4, 5, 7)  # SUBTITLES' cue numbers, timings and blank lines
WEB_PAGE = f"<p>{SENTENCE} <b>{SECOND}</b></p>\n"


def test_file_box_translates_files_as_the_api_does(browser, translation_server, tmp_path):
    url = translation_server.url
    open_page(browser, url)
    settings = httpx.get(url + "/frontend/settings").json()
    assert settings["filesTranslation"] is True
    assert browser.find_element(By.ID, "file-input").get_attribute("accept") == ",".join(
        settings["supportedFilesFormat"]
    )
    for name, body in [("subs.srt", SUBTITLES), ("page.html", WEB_PAGE)]:
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        assert translate_file_in_page(browser, path) == "done", text_of(browser, "file-status")
        shown = expected_conditions.visibility_of_element_located((By.ID, "file-link"))
        link = WebDriverWait(browser, WAIT).until(shown, "no download link")
        assert link.get_attribute("download") == name
        assert link.get_attribute("href").startswith(url + "/download_file/")
        assert link.get_attribute("href").endswith(name)
        download = translate_file_api(url, path)
        assert download.status_code == 200, download.text
        preview = text_of(browser, "file-preview")
        assert preview == download.content.decode("utf-8")
        if name.endswith(".srt"):  # cue numbers, timings and blank lines kept byte for byte
            lines, original = preview.split("\n"), body.split("\n")
            assert len(lines) == len(original)
            assert [lines[i] for i in KEPT_LINES] == [original[i] for i in KEPT_LINES]
        else:
            assert preview.startswith("<p>") and preview.endswith("</p>\n")


def test_file_box_shows_the_servers_error(browser, translation_server, tmp_path):
    """A malformed .srt: the server's 400 message in the file box's status line, no link."""
    url = translation_server.url
    open_page(browser, url)
    path = tmp_path / "bad.srt"
    path.write_text("1\n00:00:01 -> x\nHello.\n", encoding="utf-8")
    assert translate_file_in_page(browser, path) == "error"
    answer = translate_file_api(url, path)
    assert answer.status_code == 400
    assert text_of(browser, "file-status") == answer.json()["error"]
    assert "malformed SRT timing" in text_of(browser, "file-status")
    assert not browser.find_element(By.ID, "file-link").is_displayed()
    assert not browser.find_element(By.ID, "file-preview").is_displayed()
    assert browser.find_element(By.ID, "file-button").is_enabled()


def test_complete_page_streams_what_the_api_returns(browser, lm_server):
    url = lm_server.url
    open_page(browser, url)
    assert not browser.find_element(By.ID, "source").is_displayed()
    assert not browser.find_element(By.ID, "file-input").is_displayed()
    assert text_of(browser, "meta").startswith("tiny-lm · decoder-only language model")
    assert [
        browser.find_element(By.ID, name).get_attribute("value")
        for name in ("temperature", "top_p", "max_tokens")
    ] == ["1.0", "0.9", "64"]

    prompt = "The weather today"
    type_into(browser, "prompt", prompt)
    type_into(browser, "temperature", "0")  # greedy: the same text every time
    type_into(browser, "max_tokens", "24")
    browser.find_element(By.ID, "generate").click()
    assert wait_for(browser, "done", "error", "stopped") == "done", text_of(browser, "status")
    body = {"prompt": prompt, "max_tokens": 24, "temperature": 0.0, "top_p": 0.9}
    answer = httpx.post(url + "/v1/completions", json=body, timeout=WAIT)
    assert answer.status_code == 200, answer.text
    expected = answer.json()["choices"][0]["text"]
    assert expected
    assert text_of(browser, "completion") == expected
    assert text_of(browser, "completion-prompt") == prompt
    assert browser.find_element(By.ID, "generate").is_enabled()
    assert not browser.find_element(By.ID, "stop").is_enabled()
