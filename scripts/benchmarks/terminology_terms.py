"""``terminology``'s terms: the built-in glossary (``TERMS``) with the demo model's usual words
for each, and references and outputs with the forced terms substituted for those words."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

# (English, forced Chinese, the demo model's usual words for it). Chosen on the demo model
# (configs/tiny.yaml) and its test split: none of the forced terms is in its plain beam-5
# outputs of the sentences holding the English word (the per-term table checks it again;
# dropped for that: street 马路, bus 巴士, name 姓名). No one-character usual word that
# other words hold (美 in 美好, 难 in 很难读懂): substituted there, the reference reads wrong
# (and so no "difficult": the references say 难, the model too).
# 轿 has no piece in the demo's vocabulary: 轿车 is spelled in byte pieces.
TERMS: list[tuple[str, str, tuple[str, ...]]] = [
    ("teacher", "导师", ("老师", "教师")),
    ("friend", "友人", ("朋友",)),
    ("car", "轿车", ("汽车", "车子", "车")),
    ("school", "学堂", ("学校",)),
    ("book", "书籍", ("书",)),
    ("English", "英文", ("英语",)),
    ("room", "屋子", ("房间", "房")),
    ("money", "金钱", ("钱",)),
    ("house", "住宅", ("房子", "房屋")),
    ("today", "今日", ("今天",)),
    ("tomorrow", "明日", ("明天",)),
    ("yesterday", "昨日", ("昨天",)),
    ("tonight", "今夜", ("今天晚上", "今晚")),
    ("morning", "清晨", ("早上", "早晨", "上午")),
    ("doctor", "大夫", ("医生",)),
    ("children", "儿童", ("孩子们", "小孩子", "孩子", "小孩")),
    ("problem", "难题", ("问题",)),
    ("taxi", "的士", ("出租车", "计程车")),
    ("company", "企业", ("公司",)),
    ("job", "职位", ("工作",)),
    ("buy", "购买", ("买",)),
    ("beautiful", "秀美", ("漂亮", "美丽")),
    ("happy", "愉快", ("高兴", "快乐", "幸福", "开心")),
    ("phone", "话机", ("电话", "手机")),
    ("city", "都市", ("城市",)),
    ("computer", "计算机", ("电脑",)),
    ("week", "礼拜", ("星期", "周")),
    ("students", "学员", ("学生",)),
    ("parents", "双亲", ("父母",)),
    ("idea", "点子", ("主意", "想法")),
    ("dangerous", "凶险", ("危险",)),
    ("quiet", "宁静", ("安静",)),
    ("university", "高校", ("大学",)),
    ("important", "要紧", ("重要",)),
    ("strange", "古怪", ("奇怪",)),
    ("clothes", "服装", ("衣服",)),
]
OUTCOMES = ("substituted", "already", "none")


def read_usual(path: str | Path) -> dict[str, tuple[str, ...]]:
    """``english<TAB>word[,word...]`` lines (more tab-separated words are fine too) →
    {casefolded English: usual words}."""
    usual = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            english, *fields = line.split("\t")
            words = [w.strip() for field in fields for w in field.split(",") if w.strip()]
            usual[english.strip().casefold()] = tuple(words)
    return usual


def load_terms(glossary_path: str | None, usual_path: str | None):
    """The glossary (``TERMS`` or the file's) and {casefolded English: usual words}."""
    from seq2seq.inference.glossary import Glossary, Term

    usual = {en.casefold(): words for en, _, words in TERMS}
    if glossary_path is None:
        glossary = Glossary(Term(en, zh) for en, zh, _ in TERMS)
    else:
        glossary = Glossary.read(glossary_path)
    if usual_path is not None:
        usual.update(read_usual(usual_path))
    return glossary, usual


def substitute(reference: str, target: str, usual: Sequence[str]) -> tuple[str, str]:
    """``reference`` with every usual word replaced by ``target``, and the outcome:
    "already" (it holds ``target``: left as it is), "substituted", or "none" (no usual word).

    Example:
        >>> substitute("我的老师是好老师。", "导师", ["老师", "师"])
        ('我的导师是好导师。', 'substituted')
    """
    if target in reference:
        return reference, "already"
    if not usual:
        return reference, "none"
    # The target first, so that a usual word inside it (买 in 购买) is never replaced.
    words = [target, *sorted(usual, key=len, reverse=True)]
    pattern = re.compile("|".join(map(re.escape, words)))
    changed, count = pattern.subn(target, reference)
    return changed, "substituted" if count else "none"


def substituted_outputs(terms: list, outputs: list[str], usual: dict) -> list[str]:
    """Each plain output with its terms substituted in (:func:`substitute`): the model's own
    sentence with the forced term in place of its usual word, what a perfect glossary would
    write. Its score against the original references is the ceiling of the glossary's: a
    forced term the references do not hold costs BLEU however well it is placed."""
    changed = []
    for own, output in zip(terms, outputs, strict=True):
        for term in own:
            output, _ = substitute(output, term.target, usual.get(term.source.casefold(), ()))
        changed.append(output)
    return changed


def forced_references(terms: list, references: list[list[str]], usual: dict):
    """Each term sentence's references with its terms substituted in turn, and per term the
    count of each outcome over (reference, term) pairs."""
    outcomes: dict[str, Counter] = {}
    changed_refs = []
    for own, refs in zip(terms, references, strict=True):
        changed = []
        for ref in refs:
            for term in own:
                ref, outcome = substitute(ref, term.target, usual.get(term.source.casefold(), ()))
                outcomes.setdefault(term.source, Counter())[outcome] += 1
            changed.append(ref)
        changed_refs.append(changed)
    return changed_refs, outcomes
