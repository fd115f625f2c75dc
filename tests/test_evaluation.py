"""Multi-reference scoring: held-out pairs grouped by English, sacreBLEU streams padded with
None, and the scores equal sacreBLEU's on explicit per-item reference lists."""

import pytest

from seq2seq.inference.evaluation import group_references, reference_streams, score_translations

sacrebleu = pytest.importorskip("sacrebleu")

# Items with one, three and two references. The first hypothesis is short (3 tokens against 8),
# so an empty padded reference (0 tokens) would be its closest reference length.
ITEMS = [
    ("I will buy apples today.", ["我今天会买苹果。"]),
    ("He can see the book.", ["他能看见那本书。", "他看得见这本书。", "那本书他能看见。"]),
    ("We are students.", ["我们是学生。", "我们都是学生。"]),
]
HYPOTHESES = ["苹果。", "他看见书。", "我们是学生。"]


def test_group_references_keeps_first_appearance_order():
    pairs = [("b", "乙1"), ("a", "甲1"), ("b", "乙2"), ("c", "丙1"), ("a", "甲2"), ("b", "乙3")]
    sources, references = group_references(pairs)
    assert sources == ["b", "a", "c"]
    assert references == [["乙1", "乙2", "乙3"], ["甲1", "甲2"], ["丙1"]]
    assert group_references([]) == ([], [])


def test_reference_streams_pad_with_none():
    streams = reference_streams([["a1"], ["b1", "b2", "b3"], ["c1", "c2"]])
    assert streams == [["a1", "b1", "c1"], [None, "b2", "c2"], [None, "b3", None]]
    assert reference_streams([]) == []


def test_hypothesis_equal_to_a_later_reference_scores_100():
    references = [refs for _, refs in ITEMS]
    hypotheses = [refs[-1] for refs in references]  # the last reference of each item
    result = score_translations(hypotheses, reference_streams(references))
    assert result["bleu"] == pytest.approx(100.0) and result["chrf"] == pytest.approx(100.0)
    assert (result["sentences"], result["references"]) == (3, 6)
    assert "nrefs:var" in result["bleu_signature"]


def explicit_bleu(hypotheses, references):
    """Corpus BLEU from each item's statistics against its own list of references."""
    bleu = sacrebleu.metrics.BLEU(tokenize="zh", effective_order=True)  # quiet; stats alike
    scores = [bleu.sentence_score(h, refs) for h, refs in zip(hypotheses, references, strict=True)]
    correct = [sum(s.counts[n] for s in scores) for n in range(4)]
    total = [sum(s.totals[n] for s in scores) for n in range(4)]
    sys_len, ref_len = sum(s.sys_len for s in scores), sum(s.ref_len for s in scores)
    return sacrebleu.metrics.BLEU.compute_bleu(correct, total, sys_len, ref_len, "exp").score


def test_padded_streams_score_as_explicit_reference_lists():
    references = [refs for _, refs in ITEMS]
    result = score_translations(HYPOTHESES, reference_streams(references))
    assert result["bleu"] == pytest.approx(explicit_bleu(HYPOTHESES, references), abs=0.005)
    # Repeating an item's own reference instead of None changes nothing (a duplicate is no new
    # reference for either metric): the padding is invisible to chrF too.
    width = max(map(len, references))
    repeated = [refs + [refs[0]] * (width - len(refs)) for refs in references]
    same = score_translations(HYPOTHESES, [list(s) for s in zip(*repeated, strict=True)])
    assert (same["bleu"], same["chrf"]) == (result["bleu"], result["chrf"])
    # An empty string, by contrast, would be scored as a real (empty) reference.
    empty = [[ref or "" for ref in stream] for stream in reference_streams(references)]
    assert score_translations(HYPOTHESES, empty)["bleu"] != result["bleu"]


def test_single_stream_scoring_is_unchanged():
    refs = ["我今天会买苹果。", "他明天能看见那本书。"]
    result = score_translations(refs, [refs])
    assert result["bleu"] == pytest.approx(100.0) and "nrefs:1" in result["bleu_signature"]
    assert (result["sentences"], result["references"]) == (2, 2)


@pytest.mark.slow
def test_evaluation_scores_perfect_hypotheses_100():
    refs = ["我今天会买苹果。", "他明天能看见那本书。"]
    assert score_translations(refs, [refs])["bleu"] == pytest.approx(100.0)
