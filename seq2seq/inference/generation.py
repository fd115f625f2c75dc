"""Text generation with a decoder-only checkpoint: prompts in, continuations out, in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.decoding.decode import generate_ids
from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.decoding.search import SearchConfig
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.cpu import check_quantize, prepare_for_inference
from seq2seq.inference.pieces import MAX_TOKENS, token_batches
from seq2seq.model import Transformer
from seq2seq.textio import one_line, warn_lines


@dataclass(frozen=True)
class Completion:
    """A prompt's continuation as an LM server reports it.

    Attributes:
        text: the new text only (without the prompt).
        prompt_tokens: the prompt's tokens as the model read them (bos included).
        completion_tokens: new tokens, without the eos.
        finish_reason: "stop" (the model ended it) or "length" (the token limit did).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


class Generator:
    """A decoder-only model and its tokenizer, continuing prompts.

    Examples:
        >>> generator = Generator.from_checkpoint("runs/lm/checkpoints/last.ckpt")
        >>> generator.generate(["我们明天"], sampling=SamplingConfig(top_p=0.9, seed=3))
        ['我们明天…']  # a sampled continuation (docs/benchmarks.md shows some)
    """

    def __init__(self, model: Transformer, tokenizer, search: SearchConfig) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.search = search

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str = "cpu", quantize: str | None = None
    ) -> Generator:
        """Load a checkpoint written by ``seq2seq fit`` with ``decoder_only: true``; on the CPU
        in float32 its weights are packed for inference, or with ``quantize="int8"`` quantized
        to int8 (``seq2seq.inference.packed.prepare_for_inference``)."""
        check_quantize(quantize, device)
        loaded = load_model(path, device)
        if not loaded.model.config.decoder_only:
            raise CheckpointError(
                f"{path}: an encoder-decoder model cannot continue a prompt; use "
                "'seq2seq translate', or train with decoder_only: true (configs/lm.yaml)"
            )
        return cls(prepare_for_inference(loaded.model, quantize), loaded.tokenizer, loaded.search)

    def prompt_ids(self, text: str) -> list[int]:
        """``[bos] + tokens``: how every training document starts."""
        return [self.model.config.bos_id, *self.tokenizer.encode(text)]

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 64,
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 (frozen)
        beam_size: int = 1,
        max_tokens: int = MAX_TOKENS,
        on_text: Callable[[str], None] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Each prompt followed by its continuation: exactly one line per prompt, in order.

        Args:
            prompts: texts to continue; an empty one generates from scratch.
            max_new_tokens: most tokens to add (fewer when the model's positions run out).
            sampling: temperature / top-k / top-p / seed; temperature 0 is greedy.
            beam_size: > 1 runs beam search instead of sampling.
            max_tokens: positions (prompt + new tokens) per batch.
            on_text: with a single prompt and no beam, called with each new piece of text as
                soon as it is decoded (streaming).
            on_batch: called with the number of prompts finished after each batch (progress).
        """
        check_sampling(sampling, beam_size, max_new_tokens)
        found = self._continue(
            prompts,
            max_new_tokens,
            sampling,
            beam_size,
            max_tokens,
            range(len(prompts)),
            on_text,
            on_batch,
        )
        return [
            one_line(prompt + self._continuation(ids, new))
            for prompt, (ids, new) in zip(prompts, found, strict=True)
        ]

    def complete(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 16,
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 (frozen)
        indices: Sequence[int] | None = None,
        max_tokens: int = MAX_TOKENS,
        on_text: Callable[[str], None] | None = None,
    ) -> list[Completion]:
        """Sample a continuation of each prompt (the OpenAI completions convention).

        Args:
            indices: each prompt's random stream (``SamplingConfig.seed``); 0..N-1 by default.
                A server asked for n samples of a prompt passes it n times with n indices.
            on_text: with a single prompt, called with each new piece of text (streaming).
        """
        check_sampling(sampling, 1, max_new_tokens)
        indices = range(len(prompts)) if indices is None else indices
        found = self._continue(prompts, max_new_tokens, sampling, 1, max_tokens, indices, on_text)
        positions = self.model.config.max_positions
        completions = []
        for ids, new in found:
            limit = min(max_new_tokens, positions - len(ids))
            reason = "length" if len(new) >= limit else "stop"
            completions.append(Completion(self._continuation(ids, new), len(ids), len(new), reason))
        return completions

    def _continue(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        sampling: SamplingConfig,
        beam_size: int,
        max_tokens: int,
        indices: Sequence[int],
        on_text: Callable[[str], None] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[tuple[list[int], list[int]]]:
        """Each prompt's ids as the model read them (cut when over-long) and its new tokens,
        in batches of ``max_tokens`` positions; a prompt's random stream is ``indices[i]``."""
        encoded = [self.prompt_ids(prompt) for prompt in prompts]
        self._truncate(encoded, max_new_tokens)
        found: list[tuple[list[int], list[int]]] = [([], [])] * len(prompts)
        streaming = on_text is not None and len(prompts) == 1 and beam_size == 1
        for batch in token_batches(encoded, max_tokens, extra=max_new_tokens):
            stream = _TextStream(
                self.tokenizer, encoded[batch[0]], self.model.config.eos_id, on_text
            )
            new = generate_ids(
                self.model,
                [encoded[i] for i in batch],
                max_new_tokens,
                sampling,
                beam_size,
                self.search,
                on_token=stream.push if streaming else None,
                indices=[indices[i] for i in batch],
            )
            for index, tokens in zip(batch, new, strict=True):
                found[index] = (encoded[index], tokens)
            if on_batch is not None:
                on_batch(len(batch))
        return found

    def _continuation(self, prompt: list[int], new: list[int]) -> str:
        """The text the new tokens add (decoding them with the prompt keeps word spacing)."""
        return _suffix(self.tokenizer.decode(prompt), self.tokenizer.decode(prompt + new))

    def _truncate(self, encoded: list[list[int]], max_new_tokens: int) -> None:
        """Keep the end of over-long prompts so that generation has room; warn once."""
        positions = self.model.config.max_positions
        limit = max(1, positions - min(max_new_tokens, positions // 2))
        cut = [i + 1 for i, ids in enumerate(encoded) if len(ids) > limit]
        for i in cut:
            encoded[i - 1] = [self.model.config.bos_id, *encoded[i - 1][-(limit - 1) :]]
        if cut:
            warn_lines(f"kept the last {limit} tokens of {len(cut)} over-long prompt(s)", cut)


def check_sampling(sampling: SamplingConfig, beam_size: int, max_new_tokens: int) -> None:
    """One-line ValueErrors for settings that cannot work."""
    if sampling.temperature < 0:
        raise ValueError(f"--temperature must be >= 0, got {sampling.temperature}")
    if sampling.top_k < 0:
        raise ValueError(f"--top-k must be >= 0 (0 = off), got {sampling.top_k}")
    if not 0 < sampling.top_p <= 1:
        raise ValueError(f"--top-p must be in (0, 1], got {sampling.top_p}")
    if beam_size < 1:
        raise ValueError(f"--beam-size must be >= 1, got {beam_size}")
    if max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be >= 1, got {max_new_tokens}")


def _suffix(prefix: str, full: str) -> str:
    return full[len(prefix) :] if full.startswith(prefix) else full


class _TextStream:
    """Turns a single row's new tokens into new text as they come (for ``on_text``)."""

    def __init__(
        self, tokenizer, prompt: list[int], eos: int, on_text: Callable[[str], None] | None
    ) -> None:
        self.tokenizer, self.ids, self.eos, self.on_text = tokenizer, list(prompt), eos, on_text
        self.shown = tokenizer.decode(self.ids)
        self.finished = False

    def push(self, tokens) -> None:
        """Called with each step's (1,) token tensor."""
        token = int(tokens[0])
        self.finished |= token == self.eos
        if self.finished or self.on_text is None:
            return
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids)
        # A piece can change how the text before it decodes (rarely), and a byte piece that
        # does not complete a character decodes as U+FFFD: wait until the text settles.
        if text.endswith("\ufffd"):
            return
        if text.startswith(self.shown) and len(text) > len(self.shown):
            self.on_text(text[len(self.shown) :])
            self.shown = text
