"""kiln_models.generate: token generation over a LlamaModel: greedy (argmax) or top-k/top-p
sampling, both on the device.

generate() prefills the prompts (several per prefill, as many as the model's max_tokens
allows; a longer prompt alone, in pieces of max_tokens, each after the cached ones), picks each request's first token from the prefill logits, then runs decode steps for
the whole batch. A decode step touches only fixed buffers: the host copies its inputs (the
previous tokens, positions, slots, block tables, context lengths, the sampling step) into the
model's fixed input arrays, the kernels run on fixed row views, and the chosen tokens land in
the model's fixed next_tokens array; on the GPU the step is a CUDA graph replayed per token
(LlamaModel.decode_tokens). With graphs and no stop token the steps after the first are
queued without waiting (LlamaModel.decode_steps_async: the host prepares all their other inputs
first and uploads them in one copy, each step reads the tokens the previous one chose on the
device, the ids come back in one copy at the end), so the GPU does not sit idle while the host
reads a token and prepares the next step.
"""

import dataclasses
import itertools
import time

import numpy as np

__all__ = ["SamplingParams", "GenerationResult", "generate"]

_ids = itertools.count()


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy (argmax, the first maximum as torch.argmax); otherwise logits
    / temperature, then the top_k most likely tokens (0: all), then the smallest prefix whose
    probability reaches top_p, sampled deterministically from (seed, step)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.temperature, (int, float)) or self.temperature < 0:
            raise ValueError(f"SamplingParams: temperature must be >= 0, got "
                             f"{self.temperature!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"SamplingParams: top_k must be an int >= 0, got {self.top_k!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams: top_p must be in (0, 1], got {self.top_p!r}")

    @property
    def greedy(self):
        return self.temperature == 0


@dataclasses.dataclass
class GenerationResult:
    """tokens[i]: the ids generated for prompt i; times in seconds (device work included)."""

    tokens: list
    prefill_seconds: float
    decode_seconds: float
    prefill_tokens: int
    decode_tokens: int

    @property
    def prefill_tokens_per_s(self):
        return self.prefill_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens_per_s(self):
        return self.decode_tokens / self.decode_seconds if self.decode_seconds else 0.0


def _chunks(prompts, max_batch, max_tokens):
    """Consecutive groups of prompt indices that fit one prefill."""
    group, tokens = [], 0
    for i, p in enumerate(prompts):
        if group and (len(group) == max_batch or tokens + len(p) > max_tokens):
            yield group
            group, tokens = [], 0
        group.append(i)
        tokens += len(p)
    if group:
        yield group


def generate(model, prompts, new_tokens, sampling=None, stop_token=None):
    """Generates `new_tokens` ids after each prompt of `prompts` (lists or int arrays),
    decoding them all as one batch; a request that produces `stop_token` (when given) ends
    there, its last id the stop token, and leaves the batch. Returns a GenerationResult. The
    requests' KV cache blocks are freed at the end (also on error)."""
    sampling = sampling or SamplingParams()
    prompts = [np.asarray(p) for p in prompts]
    if not prompts or len(prompts) > model.max_batch:
        raise ValueError(f"generate: {len(prompts)} prompts; the model decodes 1 to "
                         f"max_batch={model.max_batch} at once")
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"generate: new_tokens must be a positive int, got {new_tokens!r}")
    for i, p in enumerate(prompts):
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"generate: prompt {i} must be a non-empty 1-D list of ids, got "
                             f"shape {p.shape}")
        if p.size + new_tokens > model.max_seq_len:
            raise ValueError(f"generate: prompt {i} ({p.size} tokens) + {new_tokens} new "
                             f"tokens exceed the model's max_seq_len={model.max_seq_len}")
    if stop_token is not None and (isinstance(stop_token, bool) or
                                   not isinstance(stop_token, (int, np.integer)) or
                                   not 0 <= stop_token < model.config.vocab_size):
        raise ValueError(f"generate: stop_token must be an id in [0, "
                         f"{model.config.vocab_size}), got {stop_token!r}")
    seqs = [f"gen{next(_ids)}" for _ in prompts]
    out = [[] for _ in prompts]
    decoded = 0
    try:
        start = time.perf_counter()
        for group in _chunks(prompts, model.max_batch, model.max_tokens):
            if len(group) == 1:  # a long prompt in pieces; the last piece's logits count
                p, n = prompts[group[0]], model.max_tokens
                for lo in range(0, p.size, n):
                    logits = model.prefill([(seqs[group[0]], p[lo:lo + n])])
            else:
                logits = model.prefill([(seqs[i], prompts[i]) for i in group])
            for i, tok in zip(group, model.select(logits, sampling, 0)):
                out[i].append(int(tok))
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        if stop_token is None and model.cuda_graphs and new_tokens > 2 and \
                hasattr(model, "decode_steps_async"):
            # The first step runs (and is captured) as usual; the others are queued back to
            # back, each reading the tokens the one before chose on the device, and the ids
            # come back in one copy at the end.
            B = len(seqs)
            tokens = model.decode_tokens(seqs, np.array([o[-1] for o in out]), sampling, 1)
            for o, tok in zip(out, tokens):
                o.append(int(tok))
            history = model.decode_steps_async(seqs, sampling, 2, new_tokens - 2)
            for row in model.arrays.download(history)[:, :B]:
                for o, tok in zip(out, row):
                    o.append(int(tok))
            decoded = B * (new_tokens - 1)
        for step in range(1, new_tokens) if not decoded else ():
            live = [i for i, o in enumerate(out) if o[-1] != stop_token]
            if not live:
                break
            tokens = model.decode_tokens([seqs[i] for i in live],
                                         np.array([out[i][-1] for i in live]), sampling, step)
            for i, tok in zip(live, tokens):
                out[i].append(int(tok))
            decoded += len(live)
        decode_s = time.perf_counter() - start
    finally:
        for s in seqs:
            if s in model.kv.tables:
                model.release(s)
    return GenerationResult(out, prefill_s, decode_s, int(sum(p.size for p in prompts)),
                            decoded)
