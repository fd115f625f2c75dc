"""PO and XLIFF through the real pipeline: ``seq2seq translate --input F --output O`` with the
tiny checkpoint (its Chinese is noise; what is checked is the file: placeholders, structure,
``msgfmt -c``, well-formed XLIFF with its sources)."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.dom.minidom

import pytest

from seq2seq.cli import main
from tests.test_formats_po import TEMPLATE
from tests.test_formats_xliff import V12, V20, sources, targets


def run(checkpoint, source, output) -> int:
    return main(
        ["translate", "--checkpoint", str(checkpoint), "--beam-size", "1",
         "--input", str(source), "--output", str(output)]
    )  # fmt: skip


def test_po_through_the_command(translation_checkpoint, tmp_path):
    source, output = tmp_path / "messages.pot", tmp_path / "zh.po"
    source.write_text(TEMPLATE, encoding="utf-8")
    assert run(translation_checkpoint, source, output) == 0
    out = output.read_text(encoding="utf-8")
    assert out.count("msgid ") == TEMPLATE.count("msgid ")
    assert re.search(r'msgstr ".*%\(name\)s.*"', out)  # the placeholder kept
    assert re.search(r'msgstr\[0\] ".*%d.*"', out)
    if shutil.which("msgfmt"):
        check = ["msgfmt", "-c", "--use-fuzzy", "-o", str(tmp_path / "m.mo"), str(output)]
        assert subprocess.run(check, capture_output=True).returncode == 0


@pytest.mark.parametrize("text", [V12, V20], ids=["1.2", "2.0"])
def test_xliff_through_the_command(translation_checkpoint, tmp_path, text):
    source, output = tmp_path / "strings.xlf", tmp_path / "zh.xlf"
    source.write_text(text, encoding="utf-8")
    assert run(translation_checkpoint, source, output) == 0
    out = output.read_text(encoding="utf-8")
    xml.dom.minidom.parseString(out)
    assert sources(out) == sources(text)
    assert out.count('<g id="1">') + out.count('<pc id="1">') == 2  # in source and target
    assert any("%s" in t or "{0}" in t for t in targets(out))  # the placeholder kept
