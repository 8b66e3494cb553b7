"""kiln_models.scheduler: in-flight (continuous) batching over a LlamaModel.

Requests wait in arrival order. Each step first admits waiting requests while the batch has
room (max_batch), their prompts fit one prefill (max_tokens) and the KV cache can hold their
whole budget (prompt + max_new_tokens, so that a running request never runs out of blocks):
those are prefilled together and get their first token. A prompt longer than max_tokens is
prefilled alone in pieces of max_tokens, one piece a step (generate()'s pieces, so its tokens
are still those of its solo run), and gets its first token with the last piece; nothing else
is admitted meanwhile. Then every other running request decodes one token, in one batch. A
request that has its max_new_tokens (or produced its stop token) leaves the batch and its
blocks go back to the free list, where the next waiting request finds them. With greedy
decoding a request's tokens are those it gets decoded alone; sampled, they are drawn from
(seed, the scheduler's step, the request's arrival number), whatever its row.
"""

import dataclasses
import itertools
import time

import numpy as np

from .generate import SamplingParams

__all__ = ["Request", "Scheduler", "latency_stats"]

_ids = itertools.count()


@dataclasses.dataclass(eq=False)
class Request:
    """One generation request; the scheduler fills tokens and the times (perf_counter s)."""

    prompt: np.ndarray
    max_new_tokens: int
    stop_token: int = None
    id: str = None
    tokens: list = dataclasses.field(default_factory=list)
    key: int = 0  # the sampler's draw key (its arrival number: the same in any batch)
    prefilled: int = 0  # prompt tokens in the cache (a long prompt's pieces so far)
    arrival: float = None
    token_times: list = dataclasses.field(default_factory=list)

    @property
    def done(self):
        return len(self.tokens) >= self.max_new_tokens or (
            self.stop_token is not None and bool(self.tokens) and
            self.tokens[-1] == self.stop_token)

    @property
    def time_to_first_token(self):
        return self.token_times[0] - self.arrival if self.token_times else None

    @property
    def per_token_latency(self):
        """Mean seconds between output tokens after the first (None with one token)."""
        t = self.token_times
        return (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None


class Scheduler:
    """Continuous batching of Requests on `model` with one SamplingParams for all."""

    def __init__(self, model, sampling=None):
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.waiting, self.running, self.finished = [], [], []
        self.steps = 0
        self._committed = 0  # KV blocks promised to running requests (their whole budget)
        self.prefilling = None  # the long prompt being prefilled in pieces

    def add(self, prompt, max_new_tokens, stop_token=None):
        """Queues a request; returns it (its tokens fill in as the scheduler runs)."""
        m = self.model
        prompt = np.asarray(prompt)
        if prompt.ndim != 1 or prompt.size == 0 or not np.issubdtype(prompt.dtype, np.integer):
            raise ValueError(f"Scheduler.add: the prompt must be a non-empty 1-D integer "
                             f"array, got {prompt.dtype} {prompt.shape}")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or \
                max_new_tokens < 1:
            raise ValueError(f"Scheduler.add: max_new_tokens must be a positive int, got "
                             f"{max_new_tokens!r}")
        if prompt.size + max_new_tokens > m.max_seq_len:
            raise ValueError(f"Scheduler.add: {prompt.size} prompt + {max_new_tokens} new "
                             f"tokens exceed the model's max_seq_len={m.max_seq_len}")
        if self._blocks(prompt.size, max_new_tokens) > m.kv.allocator.num_blocks:
            raise ValueError(f"Scheduler.add: the request needs "
                             f"{self._blocks(prompt.size, max_new_tokens)} KV blocks, the "
                             f"cache has {m.kv.allocator.num_blocks}")
        n = next(_ids)
        r = Request(prompt, max_new_tokens, stop_token, f"req{n}", key=n % 2**31,
                    arrival=time.perf_counter())
        self.waiting.append(r)
        return r

    def _blocks(self, prompt_len, new_tokens):
        # the last token is sampled, never written to the cache
        return self.model.kv.blocks_for(prompt_len + new_tokens - 1)

    def _admit(self):
        """The waiting requests prefilled together this step; a long prompt at the head of
        the queue, when the batch has room and its blocks fit, becomes `prefilling` instead
        (alone: the group is then empty)."""
        m, group, tokens = self.model, [], 0
        while self.waiting and len(self.running) + len(group) < m.max_batch:
            r = self.waiting[0]
            need = self._blocks(r.prompt.size, r.max_new_tokens)
            if self._committed + need > m.kv.allocator.num_blocks:
                break
            if r.prompt.size > m.max_tokens:
                if not group:
                    self.prefilling = self.waiting.pop(0)
                    self._committed += need
                break
            if tokens + r.prompt.size > m.max_tokens:
                break
            group.append(self.waiting.pop(0))
            tokens += r.prompt.size
            self._committed += need
        return group

    def _prefill_piece(self):
        """The next piece of the long prompt being prefilled; with its last, the request
        gets its first token and joins the batch."""
        m, r = self.model, self.prefilling
        piece = r.prompt[r.prefilled:r.prefilled + m.max_tokens]
        logits = m.prefill([(r.id, piece)])
        r.prefilled += piece.size
        if r.prefilled == r.prompt.size:
            self._record([r], m.select(logits, self.sampling, 0, keys=[r.key]))
            self.running.append(r)
            self.prefilling = None

    def _record(self, requests, tokens):
        now = time.perf_counter()
        for r, t in zip(requests, tokens):
            r.tokens.append(int(t))
            r.token_times.append(now)

    def _retire(self):
        for r in [r for r in self.running if r.done]:
            self.running.remove(r)
            self.model.release(r.id)
            self._committed -= self._blocks(r.prompt.size, r.max_new_tokens)
            self.finished.append(r)

    def step(self):
        """Admits and prefills what fits, decodes the rest of the batch one token; returns
        whether work remains."""
        m = self.model
        decoding = list(self.running)
        group = [] if self.prefilling else self._admit()
        if self.prefilling:
            self._prefill_piece()
        elif group:
            logits = m.prefill([(r.id, r.prompt) for r in group])
            for r in group:
                r.prefilled = r.prompt.size
            self._record(group, m.select(logits, self.sampling, 0, keys=[r.key for r in group]))
            self.running.extend(group)
        if decoding:
            tokens = m.decode_tokens([r.id for r in decoding],
                                     np.array([r.tokens[-1] for r in decoding]), self.sampling,
                                     self.steps + 1, keys=[r.key for r in decoding])
            self._record(decoding, tokens)
        if not group and not decoding and self.waiting and self.prefilling is None and \
                not self.running:
            raise RuntimeError("Scheduler: no request can be admitted into an empty batch "
                               "(the model's KV cache is too small)")
        self.steps += 1
        self._retire()
        return bool(self.waiting or self.running or self.prefilling)

    def run(self):
        """Steps until every queued request has finished; returns them in finishing order."""
        while self.step():
            pass
        return self.finished


def latency_stats(requests, seconds):
    """Throughput and p50/p99 time to first token and per-token latency (ms) of finished
    requests served in `seconds`."""
    ttft = [r.time_to_first_token * 1e3 for r in requests]
    tpot = [r.per_token_latency * 1e3 for r in requests if r.per_token_latency is not None]
    out = {"requests": len(requests), "tokens": sum(len(r.tokens) for r in requests)}
    out["tokens_per_s"] = out["tokens"] / seconds if seconds else 0.0
    for name, values in (("ttft_ms", ttft), ("tpot_ms", tpot)):
        if values:
            out[name + "_p50"] = float(np.percentile(values, 50))
            out[name + "_p99"] = float(np.percentile(values, 99))
    return out
