"""The model a server holds: a translator or a language model, and the batch functions that
the worker thread runs on it (``seq2seq.serve.worker``). No HTTP here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from seq2seq.data.truecase import Truecaser
from seq2seq.decoding.continuous import ContinuousBatch, ContinuousBeam, ContinuousGreedy
from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.decoding.search import Hypothesis
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.cpu import check_quantize, prepare_for_inference
from seq2seq.inference.engines import TorchEngine, read_shortlist, token_rules
from seq2seq.inference.generation import Completion, Generator
from seq2seq.inference.translator import Translator
from seq2seq.serve.worker import Job
from seq2seq.textio import one_line


@dataclass
class TranslationWork:
    """A request's sentences for ``translate_jobs``: encoded, empty ones as []; with a
    glossary, each one's constraints (None where it has no term)."""

    encoded: list[list[int]]
    attention: bool = False
    constraints: list | None = None


@dataclass
class TranslatedSentence:
    """One sentence's hypotheses (best first; [] for an empty sentence) and, when asked, its
    cross-attention: one row per output token (the last one is eos) over the source pieces."""

    hypotheses: list[Hypothesis]
    attention: dict | None = None


@dataclass
class CompletionWork:
    """A completions request for ``complete_job``: each prompt ``n`` times."""

    prompts: list[str]
    n: int
    max_new_tokens: int
    sampling: SamplingConfig
    on_text: Callable[[int, str], None] | None = None  # streaming: (choice index, new text)
    cancelled: threading.Event = field(default_factory=threading.Event)


class Cancelled(Exception):
    """A streaming client went away; its generation stops."""


@dataclass(eq=False)  # compared and hashed as itself
class ServedModel:
    """What ``seq2seq serve`` serves: a ``Translator`` (encoder-decoder, decoder-only translator,
    or a CTranslate2 export), or a ``Generator`` (a decoder-only language model)."""

    name: str
    translator: Translator | None = None
    generator: Generator | None = None
    engine: str = "torch"
    quantize: str | None = None

    def __post_init__(self) -> None:
        if (self.translator is None) == (self.generator is None):
            raise ValueError("a ServedModel holds a translator or a generator")

    @classmethod
    def load(
        cls,
        path: str | Path,
        engine: str = "torch",
        device: str = "cpu",
        name: str | None = None,
        quantize: str | None = None,
        shortlist: str | Path | None = None,
    ) -> ServedModel:
        """Load once, deciding from the checkpoint whether it translates or continues text;
        ``quantize="int8"``: decode in int8 on the CPU (``prepare_for_inference``);
        ``shortlist``: a ``seq2seq shortlist`` file our engine decodes with (whole batches)."""
        name = name or model_name(path)
        if shortlist is not None and engine == "ctranslate2":
            raise ValueError("--shortlist is for our engine; export it into the CTranslate2 model")
        if engine == "ctranslate2":
            # The server's compute threads (torch's): one sentence at a time gains from them.
            threads = torch.get_num_threads()
            translator = Translator.from_ctranslate2(path, device, quantize, threads)
            return cls(name, translator=translator, engine=engine, quantize=quantize)
        check_quantize(quantize, device)
        loaded = load_model(path, device)
        model = prepare_for_inference(loaded.model, quantize)
        if loaded.is_language_model:
            if shortlist is not None:
                raise ValueError(f"{path}: a language model; a shortlist is for translation")
            generator = Generator(model, loaded.tokenizer, loaded.search)
            return cls(name, generator=generator, quantize=quantize)
        listed = None
        if shortlist is not None:
            listed = read_shortlist(shortlist, loaded.tokenizer, model.config)
        engine = TorchEngine(model, loaded.search, token_rules(loaded.tokenizer), listed)
        translator = Translator(engine, loaded.tokenizer, Truecaser(loaded.truecase))
        return cls(name, translator=translator, quantize=quantize)

    @property
    def translates(self) -> bool:
        return self.translator is not None

    @property
    def attention(self) -> bool:
        """Whether ``/v1/translate`` can return attention (our engine, not CTranslate2)."""
        return self.translator is not None and isinstance(self.translator.engine, TorchEngine)

    @property
    def precision(self) -> str:
        """What the weights decode in: ``int8`` when quantized at load; otherwise float32 (our
        engine) or what the CTranslate2 export holds."""
        if self.quantize is not None:
            return self.quantize
        return "float32" if self.engine == "torch" else "precision as exported"

    @property
    def kind(self) -> str:
        if self.generator is not None:
            return "decoder-only language model"
        model = getattr(self.translator.engine, "model", None)  # type: ignore[union-attr]
        decoder_only = model is not None and model.config.decoder_only
        return "decoder-only translator" if decoder_only else "encoder-decoder translator"

    def tokens(self, ids: Sequence[int]) -> list[str]:
        tokenizer = self._tokenizer()
        return [tokenizer.id_to_piece(i) for i in ids]

    def text(self, hypothesis: Hypothesis) -> str:
        return one_line(self._tokenizer().decode(hypothesis.tokens))

    def _tokenizer(self):  # noqa: ANN202
        return (self.translator or self.generator).tokenizer  # type: ignore[union-attr]

    def continuous(self, max_tokens: int, beam_size: int) -> ContinuousJobs | None:
        """Continuous batching for requests at the server's beam size, where the model allows
        it: our engine and an encoder-decoder model without a shortlist (None otherwise:
        whole batches; a shortlist's batch is its sentences' union, fixed for the batch)."""
        engine = getattr(self.translator, "engine", None)
        if not isinstance(engine, TorchEngine) or engine.model.config.decoder_only:
            return None
        if engine.shortlist is not None:
            return None
        if beam_size == 1:
            decoder: ContinuousBatch = ContinuousGreedy(engine.model, engine.search, engine.rules)
        else:
            decoder = ContinuousBeam(engine.model, engine.search, beam_size, rules=engine.rules)
        return ContinuousJobs(decoder, beam_size, max_tokens)

    # -- run in the worker thread --------------------------------------------------------

    def translate_jobs(
        self, jobs: Sequence[Job], beam_size: int, n_best: int, max_tokens: int
    ) -> list[list[TranslatedSentence]]:
        """Decode the sentences of several requests in shared batches; one list per job."""
        assert self.translator is not None
        every = [ids for job in jobs for ids in job.payload.encoded]
        constraints = None
        if any(job.payload.constraints for job in jobs):
            constraints = [
                c
                for job in jobs
                for c in job.payload.constraints or [None] * len(job.payload.encoded)
            ]
        found = self.translator.decode_encoded(
            every, beam_size, max_tokens, n_best, constraints=constraints
        )
        results, start = [], 0
        for job in jobs:
            work: TranslationWork = job.payload
            mine = found[start : start + len(work.encoded)]
            start += len(work.encoded)
            results.append(
                [
                    TranslatedSentence(hyps, self._attention(ids, hyps) if work.attention else None)
                    for ids, hyps in zip(work.encoded, mine, strict=True)
                ]
            )
        return results

    def complete_job(self, work: CompletionWork) -> list[Completion]:
        """A completions request: prompt i's j-th sample is choice ``i * n + j`` and draws from
        random stream ``i * n + j``, streamed or not (so a seed gives the same text both ways)."""
        assert self.generator is not None
        prompts = [prompt for prompt in work.prompts for _ in range(work.n)]
        if work.on_text is None:
            return self.generator.complete(prompts, work.max_new_tokens, work.sampling)
        completions = []
        for index, prompt in enumerate(prompts):

            def on_text(piece: str, index: int = index) -> None:
                if work.cancelled.is_set():
                    raise Cancelled
                work.on_text(index, piece)  # type: ignore[misc]

            try:
                completions += self.generator.complete(
                    [prompt], work.max_new_tokens, work.sampling, indices=[index], on_text=on_text
                )
            except Cancelled:  # the client went away: nobody reads the rest
                return completions
        return completions

    def _attention(self, source: list[int], hyps: list[Hypothesis]) -> dict | None:
        """Cross-attention of the best hypothesis, mean over layers and heads: (T, S) with T
        its tokens plus eos (``TorchEngine.attention``). None for an empty sentence or a
        CTranslate2 engine (whose attention we do not read)."""
        engine = self.translator.engine  # type: ignore[union-attr]
        if not hyps or not isinstance(engine, TorchEngine):
            return None
        weights = engine.attention(source, list(hyps[0].tokens))  # (T + 1, S)
        return {
            "source": self.tokens(source),
            "target": self.tokens([*hyps[0].tokens, engine.model.config.eos_id]),
            "weights": [[round(float(w), 4) for w in row] for row in weights],
        }


def model_name(path: str | Path) -> str:
    """``runs/NAME/checkpoints/last.ckpt`` -> NAME; otherwise the file or directory name."""
    path = Path(path)
    if path.parent.name == "checkpoints" and path.parent.parent.name:
        return path.parent.parent.name
    return path.stem if path.suffix == ".ckpt" else path.name


class ContinuousJobs:
    """Translation jobs at one beam size on a continuous decoder (``batching.Continuous``):
    a job's sentences join together and the job is done when its last sentence is."""

    def __init__(self, decoder: ContinuousBatch, beam_size: int, max_tokens: int) -> None:
        self.decoder, self.beam_size = decoder, beam_size
        self.max_tokens = max_tokens  # source tokens x beam being decoded at once
        self.results: dict[int, list[TranslatedSentence]] = {}
        self.left: dict[int, int] = {}  # sentences still decoding, per job
        self.jobs: dict[int, Job] = {}

    @property
    def active(self) -> int:
        return self.decoder.active

    def accepts(self, job: Job) -> bool:
        """Best translations at the server's beam size. n-best lists, attention and requests
        over the token budget go to whole batches, which split them by the budget and retry
        a batch that runs out of memory in halves."""
        return job.key == ("translate", self.beam_size, 1, False) and job.cost <= self.max_tokens

    def has_room(self, cost: int) -> bool:
        decoding = self.decoder.source_tokens * self.beam_size
        return not self.decoder.active or decoding + cost <= self.max_tokens

    def add(self, job: Job) -> list[tuple[Job, object]]:
        work: TranslationWork = job.payload
        rows = [i for i, ids in enumerate(work.encoded) if ids]
        results = [TranslatedSentence([]) for _ in work.encoded]
        if not rows:
            return [(job, results)]
        self.decoder.add([work.encoded[i] for i in rows], [(id(job), i) for i in rows])
        self.jobs[id(job)], self.results[id(job)], self.left[id(job)] = job, results, len(rows)
        return []

    def step(self) -> list[tuple[Job, object]]:
        done = []
        for (job_id, row), found in self.decoder.step():
            hypotheses = found if isinstance(found, list) else [found]  # beam: n-best list
            self.results[job_id][row] = TranslatedSentence(hypotheses)
            self.left[job_id] -= 1
            if not self.left[job_id]:
                done.append((self.jobs.pop(job_id), self.results.pop(job_id)))
                del self.left[job_id]
        return done

    def abort(self) -> list[Job]:
        jobs = list(self.jobs.values())
        self.jobs.clear()
        self.results.clear()
        self.left.clear()
        self.decoder.reset()
        return jobs
