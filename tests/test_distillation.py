"""Sequence-level distillation (seq2seq.inference.distillation, seq2seq distill) and its
student: the n-best choice by chrF, an interrupted run resumed into the file an uninterrupted
one writes, the distilled corpus in the training split's place, and a student that starts from
its teacher's layers."""

import pytest
import torch

from seq2seq.cli import main
from seq2seq.decoding.search import Hypothesis
from seq2seq.errors import ConfigError, DataError
from seq2seq.inference import distillation
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.distillation import (
    DistillSettings,
    closest_by_chrf,
    completed_lines,
    distill,
)
from seq2seq.inference.evaluation import sentence_chrf
from seq2seq.training.finetune import layer_sources, student_model
from tests.helpers import (
    prepared_pairs,
    synthetic_pairs,
    tiny_checkpoint,
    tiny_config,
    write_hsk_tsv,
)

SMALL = DistillSettings(beam_size=2, n_best=2, batch_sentences=3, chunk_lines=4)


def candidates(source: str) -> list[Hypothesis]:
    """Two made-up hypotheses: the beam's best first, the source reversed second."""
    return [Hypothesis([], -1.0, -1.0, f"best {source}"), Hypothesis([], -2.0, -2.0, source[::-1])]


def fake_teacher(calls: list[str], fail_after: int | None = None):
    def translate(batch: list[str]) -> list[list[Hypothesis]]:
        if fail_after is not None and len(calls) >= fail_after:
            raise KeyboardInterrupt
        calls.extend(batch)
        return [candidates(source) for source in batch]

    return translate


SOURCES = [f"sentence number {i} " + "x" * (i % 5) for i in range(11)]
REFERENCES = [source[::-1] for source in SOURCES]


def test_the_candidate_closest_to_the_reference_is_kept_and_the_best_wins_ties():
    chrf = sentence_chrf()
    assert closest_by_chrf(["我喜欢茶", "我喜欢喝茶。"], "我喜欢喝茶。", chrf) == 1
    assert closest_by_chrf(["我喜欢喝茶。", "我喜欢喝茶。"], "我喜欢喝茶。", chrf) == 0
    assert closest_by_chrf(["甲", "乙"], "", chrf) == 0  # no reference: the beam's best


def test_every_source_gets_its_line_in_order_with_the_choice_the_reference_asks(tmp_path):
    out = tmp_path / "distilled.tsv"
    calls: list[str] = []
    assert distill(fake_teacher(calls), SOURCES, REFERENCES, out, SMALL) == (0, 11)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == [f"{s}\t{r}" for s, r in zip(SOURCES, REFERENCES, strict=True)]
    assert sorted(calls) == sorted(SOURCES)  # each source translated once
    distill(fake_teacher([]), SOURCES, None, tmp_path / "best.tsv", SMALL)
    best = (tmp_path / "best.tsv").read_text(encoding="utf-8").splitlines()
    assert best == [f"{s}\tbest {s}" for s in SOURCES]


def test_an_interrupted_run_resumes_into_the_same_file_translating_only_the_rest(tmp_path):
    whole, resumed = tmp_path / "whole.tsv", tmp_path / "resumed.tsv"
    distill(fake_teacher([]), SOURCES, REFERENCES, whole, SMALL)
    with pytest.raises(KeyboardInterrupt):  # stopped in its third chunk
        distill(fake_teacher([], fail_after=8), SOURCES, REFERENCES, resumed, SMALL)
    assert len(resumed.read_text(encoding="utf-8").splitlines()) == 8  # two chunks kept
    with resumed.open("a", encoding="utf-8") as file:
        file.write("half a li")  # a line cut by the interruption
    calls: list[str] = []
    assert distill(fake_teacher(calls), SOURCES, REFERENCES, resumed, SMALL) == (8, 11)
    assert sorted(calls) == sorted(SOURCES[8:])
    assert resumed.read_bytes() == whole.read_bytes()


def test_a_time_budget_stops_between_chunks_and_the_next_run_goes_on(tmp_path, monkeypatch):
    out = tmp_path / "distilled.tsv"
    assert distill(fake_teacher([]), SOURCES, REFERENCES, out, SMALL, deadline=0.0) == (0, 0)
    clock = iter([-1.0, 1.0])  # within the budget before the first chunk, past it after
    monkeypatch.setattr(distillation.time, "monotonic", lambda: next(clock))
    assert distill(fake_teacher([]), SOURCES, REFERENCES, out, SMALL, deadline=0.0) == (0, 4)
    monkeypatch.undo()
    assert distill(fake_teacher([]), SOURCES, REFERENCES, out, SMALL) == (4, 11)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 11


def test_a_file_from_other_sources_is_refused_in_one_line(tmp_path):
    out = tmp_path / "distilled.tsv"
    out.write_text("another source\t另一个\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"distilled.tsv:1: was distilled from other sources"):
        completed_lines(out, SOURCES)
    with pytest.raises(ValueError, match="n_best"):
        DistillSettings(beam_size=2, n_best=3)


@pytest.fixture(scope="module")
def hsk_tsv(tmp_path_factory):
    return write_hsk_tsv(tmp_path_factory.mktemp("corpus") / "pairs.tsv")


def test_distilled_pairs_replace_the_training_pairs_of_their_sources_only(hsk_tsv, tmp_path):
    plain = prepared_pairs(hsk_tsv, tmp_path / "plain")
    sources, _ = plain.split_texts("train")
    half = sources[::2]  # a distillation stopped halfway keeps the rest's references
    corpus = tmp_path / "distilled.tsv"
    corpus.write_text("".join(f"{en}\t蒸馏{i}\n" for i, en in enumerate(half)), encoding="utf-8")
    student = prepared_pairs(hsk_tsv, tmp_path / "student", {"distilled": str(corpus)})
    assert student.cache_path != plain.cache_path
    for split in ("dev", "test"):
        assert student.split_texts(split) == plain.split_texts(split)
    tokenizer = student.tokenizer
    train = [(tokenizer.decode(s), tokenizer.decode(t)) for s, t in student.dataset("train")]
    replaced = sum(en in set(half) for en in sources)  # a source with two references too
    assert len(train) == len(plain.dataset("train")) - replaced + len(half)
    targets = {en: zh for en, zh in train}
    assert all(targets[en].startswith("蒸馏") for en in half[:200])
    kept = [en for en in sources if en not in set(half)]
    assert len(kept) > 1000 and not any(targets[en].startswith("蒸馏") for en in kept)


def test_a_student_starts_from_its_teachers_embedding_and_evenly_picked_layers(tmp_path):
    assert layer_sources(1, 3) == [2] and layer_sources(2, 6) == [2, 5]
    assert layer_sources(6, 3) == [0, 0, 1, 1, 2, 2]
    teacher_path = tiny_checkpoint(tmp_path / "teacher.ckpt")
    teacher = load_model(teacher_path).model
    vocab = teacher.config.vocab_size
    wanted = tiny_config(vocab_size=vocab, n_encoder_layers=3, n_decoder_layers=1)
    config, student, _ = student_model(str(teacher_path), wanted)
    assert (config.n_encoder_layers, config.n_decoder_layers, config.d_model) == (3, 1, 32)
    assert torch.equal(student.embedding.weight, teacher.embedding.weight)
    for mine, theirs in zip(student.encoder.layers, [0, 0, 1], strict=True):
        for a, b in zip(
            mine.parameters(), teacher.encoder.layers[theirs].parameters(), strict=True
        ):
            assert torch.equal(a, b)
    for a, b in zip(
        student.decoder.layers[0].parameters(), teacher.decoder.layers[-1].parameters(), strict=True
    ):
        assert torch.equal(a, b)
    # The teacher's own shape gives the teacher back, parameter for parameter.
    _, same, _ = student_model(str(teacher_path), tiny_config(vocab_size=vocab))
    assert same.state_dict().keys() == teacher.state_dict().keys()
    assert all(torch.equal(same.state_dict()[k], v) for k, v in teacher.state_dict().items())
    with pytest.raises(ConfigError, match="d_model"):
        student_model(str(teacher_path), tiny_config(vocab_size=vocab, d_model=64))


def test_the_command_distils_a_file_and_resumes_it(tmp_path, capsys):
    teacher = tiny_checkpoint(tmp_path / "teacher.ckpt")
    pairs = synthetic_pairs()[:12]
    src, ref, out = tmp_path / "src.en", tmp_path / "ref.zh", tmp_path / "out.tsv"
    src.write_text("".join(f"{en}\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(f"{zh}\n" for _, zh in pairs), encoding="utf-8")
    args = ["distill", "--checkpoint", str(teacher), "--src", str(src), "--ref", str(ref)]
    args += ["--output", str(out), "--engine", "ours", "--beam-size", "3", "--n-best", "2"]
    assert main([*args, "--limit", "5", "--no-progress"]) == 0
    first = out.read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in first] == [en for en, _ in pairs[:5]]
    assert main([*args, "--no-progress"]) == 0
    assert "resumed after 5 lines" in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:5] == first and [line.split("\t")[0] for line in lines] == [en for en, _ in pairs]
    assert all(len(line.split("\t")) == 2 for line in lines)
