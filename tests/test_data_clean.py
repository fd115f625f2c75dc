"""Normalisation and pair filtering."""

from seq2seq.data import clean_pairs, normalize_en, normalize_zh


def test_normalize_zh_traditional_fullwidth_and_punctuation():
    assert normalize_zh("Ｔｏｍ有１２個蘋果,對嗎?") == "Tom有12个苹果，对吗？"
    assert normalize_zh("我們試試看！") == "我们试试看！"


def test_normalize_zh_keeps_ascii_punctuation_inside_numbers_and_words():
    assert normalize_zh("共1,000元，3:30见") == "共1,000元，3:30见"


def test_normalize_whitespace():
    assert normalize_en("  Hello \t\u3000 world\n") == "Hello world"
    assert normalize_en("ｆｕｌｌ　ｗｉｄｔｈ １２３") == "full width 123"
    assert normalize_zh(" 你好\u3000 吗 ") == "你好 吗"


def test_clean_pairs_counts_each_drop_reason():
    pairs = [
        ("Hello.", "你好。"),
        ("Hello.", "你好。"),  # exact duplicate
        ("Hello.", "妳好。"),  # different Chinese: kept
        ("Ｈｅｌｌｏ.", "你好。"),  # duplicate only after normalisation
        ("Thanks.", "謝謝。"),
        ("Thanks.", "谢谢。"),  # duplicate only after traditional→simplified
        ("   ", "空的"),
        ("Empty Chinese.", ""),
        ("x" * 50, "一"),  # ratio 50
        ("Long " * 30, "长" * 30),  # over max_len_chars
    ]
    kept, report = clean_pairs(pairs, max_len_chars=100, max_ratio=12)
    assert kept == [("Hello.", "你好。"), ("Hello.", "妳好。"), ("Thanks.", "谢谢。")]
    assert (report.total, report.kept, report.empty, report.duplicate) == (10, 3, 2, 3)
    assert (report.too_long, report.bad_ratio) == (1, 1)
    assert report.total == report.kept + report.empty + report.duplicate + 2
    assert "kept 3/10" in str(report) and "\n" not in str(report)
