"""kiln_models.generate: token generation over a LlamaModel: greedy (argmax) or top-k/top-p
sampling, both on the device.

generate() prefills the prompts (several per prefill, as many as the model's max_tokens
allows; a longer prompt alone, in pieces of max_tokens, each after the cached ones), picks
each request's first token from the prefill logits, then runs decode steps for the whole
batch. A decode step touches only fixed buffers: the host copies its inputs (the previous
tokens, positions, slots, block tables, context lengths, the sampling step) into the model's
fixed input arrays, the kernels run on fixed row views, and the chosen tokens land in the
model's fixed next_tokens array; on the GPU the step is a CUDA graph replayed per token
(LlamaModel.decode_tokens). With graphs the steps after the first are queued without waiting
(LlamaModel.decode_steps_async: the host prepares all their other inputs first and uploads
them in one copy, each step reads the tokens the previous one chose on the device, the ids
come back in one copy), all of them without a stop token and QUEUE_STEPS at a time with one,
so the GPU does not sit idle while the host reads a token and prepares the next step. A
request's samples are keyed by its prompt index (SamplingParams), not by its row in the batch.
"""

import dataclasses
import itertools
import time

import numpy as np

__all__ = ["SamplingParams", "GenerationResult", "generate"]

#: Steps queued at a time when generate() has a stop token (a request that stops stays in the
#: batch until they end; its tokens after the stop are dropped).
QUEUE_STEPS = 16

_ids = itertools.count()


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy (argmax, the first maximum as torch.argmax); otherwise logits
    / temperature, then the top_k most likely tokens (0: all), then the smallest prefix whose
    probability reaches top_p, sampled deterministically from (seed, step, the request's key:
    generate()'s prompt index, the scheduler's arrival number), whatever the request's row."""

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
    there, its last id the stop token, and leaves the batch (with graphs: at the end of the
    QUEUE_STEPS queued with it). Returns a GenerationResult. The requests' KV cache
    blocks are freed at the end (also on error)."""
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
            for i, tok in zip(group, model.select(logits, sampling, 0, keys=group)):
                out[i].append(int(tok))
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        # With graphs, after a step from the host's tokens (the first, or the first after the
        # batch changed: it captures the step of that size once), steps are queued on the
        # device, each reading the tokens the one before chose, their ids read back once per
        # call: all the rest without a stop token; with one, QUEUE_STEPS at a time, a request
        # that stopped leaving the batch after them (its later tokens dropped).
        # (a request's draws are keyed by its prompt index, not its row: the same whether or
        # not the requests before it left the batch)
        queued = model.cuda_graphs and hasattr(model, "decode_steps_async")
        live = [i for i, o in enumerate(out) if stop_token is None or o[-1] != stop_token]
        step, on_device = 1, False
        while live and step < new_tokens:
            ids = [seqs[i] for i in live]
            if on_device:
                S = new_tokens - step if stop_token is None else \
                    min(QUEUE_STEPS, new_tokens - step)
                rows = model.arrays.download(
                    model.decode_steps_async(ids, sampling, step, S, keys=live))[:, :len(live)]
            else:
                S, rows = 1, [model.decode_tokens(ids, np.array([out[i][-1] for i in live]),
                                                  sampling, step, keys=live)]
                on_device = queued
            for row in rows:
                for i, tok in zip(live, row):
                    if stop_token is None or out[i][-1] != stop_token:
                        out[i].append(int(tok))
                        decoded += 1
            step += S
            still = [i for i in live if stop_token is None or out[i][-1] != stop_token]
            on_device = on_device and still == live
            live = still
        decode_s = time.perf_counter() - start
    finally:
        for s in seqs:
            if s in model.kv.tables:
                model.release(s)
    return GenerationResult(out, prefill_s, decode_s, int(sum(p.size for p in prompts)),
                            decoded)
