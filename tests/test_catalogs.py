"""UI strings from gettext catalogs (seq2seq.data.catalogs, ``data.modifiers.ui_strings``):
the ``.po`` reader, what is kept, the order and cap, and the pairs joining the training split
only, a held-out sentence never among them."""

import pytest

from seq2seq.data.catalogs import read_po, ui_string_pairs, usable
from seq2seq.data.modifiers import Modifiers
from seq2seq.errors import ConfigError, DataError
from tests.helpers import prepared_pairs, write_hsk_tsv

CATALOG = r"""# A translator's comment.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#: views.py:10
msgid "Sign in"
msgstr "登录"

msgid ""
"Delete the "
"selected items"
msgstr ""
"删除所选"
"项目"

#, fuzzy
msgid "Log out"
msgstr "注销"

#~ msgid "Old button"
#~ msgstr "旧按钮"

msgctxt "month name"
msgid "May"
msgstr "五月"

msgid "one file"
msgid_plural "many files"
msgstr[0] "文件"

msgid "Say \"hello\""
msgstr "说“你好”"

msgid "Untranslated"
msgstr ""
msgid "Save"
msgstr "保存"
msgid "%(count)s items"
msgstr "%(count)s 个项目"
msgid "Click <b>here</b>"
msgstr "点击<b>这里</b>"
msgid "OK"
msgstr "OK"
"""


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "app.po"
    path.write_text(CATALOG, encoding="utf-8")
    return path


def test_a_catalog_gives_its_translated_entries(catalog):
    assert read_po(catalog) == [
        ("Sign in", "登录"),
        ("Delete the selected items", "删除所选项目"),  # strings continued on later lines
        ("May", "五月"),  # a context changes nothing
        ("one file", "文件"),  # a plural: its singular and msgstr[0]
        ('Say "hello"', "说“你好”"),  # escapes read
        ("Save", "保存"),  # after an untranslated entry with no blank line between
        ("%(count)s items", "%(count)s 个项目"),
        ("Click <b>here</b>", "点击<b>这里</b>"),
        ("OK", "OK"),
    ]  # no header, no fuzzy entry, no obsolete one, no empty translation


def test_only_plain_translations_become_training_pairs(catalog):
    pairs = ui_string_pairs(100, [catalog])
    assert pairs[:6] == [
        ("Sign in", "登录"),
        ("Delete the selected items", "删除所选项目"),
        ("May", "五月"),
        ("one file", "文件"),
        ('Say "hello"', "说“你好”"),
        ("Save", "保存"),
    ]  # then Django's, where Django is installed
    english = [en for en, _ in pairs]
    assert "%(count)s items" not in english and "Click <b>here</b>" not in english
    assert "OK" not in english[:6]  # no Chinese in its translation
    assert len(english) == len(set(english))  # each English string once
    assert ui_string_pairs(3, [catalog]) == pairs[:3]
    folder = catalog.parent / "po"  # a folder: its Chinese .po files (po/zh_CN.po)
    folder.mkdir()
    (folder / "zh_CN.po").write_text(CATALOG, encoding="utf-8")
    (folder / "fr.po").write_text('msgid "Yes"\nmsgstr "Oui"\n', encoding="utf-8")
    assert ui_string_pairs(100, [folder]) == pairs
    assert not usable("Line one\nline two", "第一行\n第二行")


def test_a_malformed_catalog_is_one_line_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.po"
    bad.write_text('msgid "Yes"\nmsgstr "是"\nmsgid Yes without quotes\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.po.*3.*not gettext syntax"):
        read_po(bad)
    with pytest.raises(DataError, match="no such catalog"):
        ui_string_pairs(10, [tmp_path / "missing.po"])


def test_catalogs_need_a_count_and_name_the_cache(catalog):
    with pytest.raises(ConfigError, match="catalogs needs a count of pairs in ui_strings"):
        Modifiers.from_dict({"catalogs": str(catalog)})
    modifiers = Modifiers.from_dict({"ui_strings": 50.0, "catalogs": str(catalog)})
    assert modifiers.ui_strings == 50 and modifiers.catalogs == (str(catalog),)
    key = modifiers.cache_key()
    catalog.write_text(CATALOG + 'msgid "Help"\nmsgstr "帮助"\n', encoding="utf-8")
    assert modifiers.cache_key() != key  # an edited catalog prepares again
    assert "ui_strings" not in Modifiers.from_dict({"dictionary": 10}).cache_key()["modifiers"]


def test_ui_strings_join_the_training_split_only(tmp_path, catalog):
    tsv = write_hsk_tsv(tmp_path / "pairs.tsv", limit=600)

    def prepare(modifiers):
        return prepared_pairs(tsv, tmp_path / "cache", modifiers, vocab_size=1000)

    plain = prepare(None)
    test_english = plain.split_texts("test")[0][0]
    held_out = tmp_path / "held_out.po"  # a catalog holding a test sentence: never trained on
    held_out.write_text(f'msgid "{test_english}"\nmsgstr "测试"\n', encoding="utf-8")
    catalogs = [str(held_out), str(catalog)]
    added = prepare({"ui_strings": 5, "catalogs": catalogs})
    for split in ("dev", "test"):
        assert decoded(plain, split) == decoded(added, split)
    before, after = decoded(plain, "train"), decoded(added, "train")
    expected = ui_string_pairs(5, catalogs)[1:]
    assert after[: len(before)] == before and after[len(before) :] == expected
    assert added.report["ui_string_pairs"] == 4 and expected[0] == ("Sign in", "登录")


def decoded(dm, split):
    data, tokenizer = dm.dataset(split), dm.tokenizer
    return [(tokenizer.decode(src), tokenizer.decode(tgt)) for src, tgt in data]


def test_a_folder_gives_its_chinese_catalogs_only_and_kana_is_not_chinese(tmp_path):
    locale = tmp_path / "locale"
    for language, text in (("zh_Hans", "保存"), ("ja", "保存します"), ("ko", "저장")):
        folder = locale / language / "LC_MESSAGES"
        folder.mkdir(parents=True)
        (folder / "app.po").write_text(f'msgid "Save"\nmsgstr "{text}"\n', encoding="utf-8")
    assert ui_string_pairs(10, [locale])[0] == ("Save", "保存")
    assert [p for p in ui_string_pairs(10, [locale]) if p[0] == "Save"] == [("Save", "保存")]
    assert not usable("Save", "保存します")  # Japanese kanji with kana


def test_catalog_lines_end_at_newlines_only_and_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "odd.po"
    text = '\ufeff# Translator: A\u2028B\r\nmsgid "Save"\r\nmsgstr "保存"\r\n'
    path.write_text(text, encoding="utf-8")
    assert read_po(path) == [("Save", "保存")]


def test_a_fuzzy_obsolete_entry_does_not_make_the_next_one_fuzzy(tmp_path):
    path = tmp_path / "obsolete.po"
    path.write_text('#, fuzzy\n#~ msgid "Old"\n#~ msgstr "旧"\nmsgid "New"\nmsgstr "新"\n')
    assert read_po(path) == [("New", "新")]


@pytest.mark.parametrize("catalogs", [None, []])
def test_an_empty_catalogs_key_is_no_catalog(catalogs):
    modifiers = Modifiers.from_dict({"dictionary": 10, "catalogs": catalogs})
    assert modifiers.catalogs == ()
    assert modifiers.cache_key() == Modifiers.from_dict({"dictionary": 10}).cache_key()


def test_catalogs_of_another_type_are_one_line():
    with pytest.raises(ConfigError, match="catalogs must be a .po path or a list of them"):
        Modifiers.from_dict({"ui_strings": 5, "catalogs": 5})
