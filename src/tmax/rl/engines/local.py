"""Inference engines for RL rollouts: token ids in, sampled ids and their log-probs out.

The trainer needs, for every sampled token, the probability μ the *engine* gave it (the
behaviour policy of DPPO, paper §4): the mask compares it with the trainer's π. So an
engine samples purely from softmax(logits / T) — no top-k, no top-p — and returns
log μ_t = log_softmax(logits_t / T)[token_t] for each sampled token.

    engine = TransformersEngine(model_dir, tokenizer)             # in process (CPU)
    engine = VLLMEngine(base_urls, key, settings=...)             # vLLM servers (engines.remote)
    [generation] = engine.generate([prompt_ids], max_tokens=64, temperature=1.0,
                                   stop_token_ids=[im_end], seed=0)
    engine.update_weights(trainer_state_dict, version=step)        # push new weights

Conventions shared by both engines (vLLM's): generation stops after a stop token, which
is kept as the last of ``token_ids``; only the given stop tokens stop it (not the
model's EOS); with a ``seed``, prompt ``i`` of a call is sampled with seed ``seed + i``,
so the same prompt twice in one call gives two different samples and a prompt's sample
does not depend on the other prompts of its batch; temperature 0 is greedy decoding and
its log-probs are those of softmax(logits).

Rollout threads call ``generate`` one prompt at a time (one per episode turn). The
transformers engine merges the calls that arrive while it is busy into one batch
(:class:`RequestBatcher`), so the episodes of a group share forward passes; vLLM's
servers get one request per turn and schedule them with continuous batching.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from tmax.rl.weights.streaming import WeightSink

log = logging.getLogger("tmax.rl.engines.local")

FinishReason = Literal["stop", "length"]


@dataclass
class Generation:
    """One sampled continuation of one prompt."""

    token_ids: list[int]
    """The sampled ids; ends with the stop token when ``finish_reason == "stop"``."""
    logprobs: list[float]
    """log μ of each sampled token under the distribution it was sampled from."""
    finish_reason: FinishReason
    """``stop``: a stop token was sampled; ``length``: ``max_tokens`` ran out."""


class Engine(Protocol):
    """What rollouts and the trainer need from an inference engine."""

    policy_version: int
    """The trainer step whose weights the engine holds (0: the initial model)."""

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        temperature: float,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
    ) -> list[Generation]: ...

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Load the trainer's weights; later generations use them, ``policy_version``
        becomes ``version``."""
        ...

    def weight_sink(self, version: int) -> WeightSink:
        """Where a streamed push goes (:func:`tmax.rl.weights.streaming.stream_weights`): once it
        finishes, ``policy_version`` is ``version``."""
        ...


def _check_request(prompts: Sequence[Sequence[int]], max_tokens: int, temperature: float) -> None:
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0, got {temperature}")
    for index, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} is empty")


@dataclass(frozen=True)
class Row:
    """One prompt of a batch with its own token budget and seed."""

    prompt: list[int]
    max_tokens: int
    seed: int | None


BatchRunner = Callable[[list[Row], float, tuple[int, ...]], list[Generation]]
"""Samples every row of a batch at one temperature with one set of stop tokens."""


@dataclass(eq=False)
class _Request:
    rows: list[Row]
    temperature: float
    stop: tuple[int, ...]
    result: list[Generation] | None = None
    error: BaseException | None = None
    done: bool = False


class RequestBatcher:
    """Merges ``generate`` calls from many threads into batches.

    A caller queues its request and then takes the engine lock; whoever holds the lock
    runs every queued request that shares the oldest one's temperature and stop tokens
    (up to ``max_rows`` prompts) as one batch and hands each caller its own results.
    Requests that arrive while a batch runs are served together by the next one, so
    nothing waits on a timer, and a single caller gets exactly one batch of its own.
    """

    def __init__(self, run: BatchRunner, lock: threading.Lock, max_rows: int = 64) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self._run = run
        self._lock = lock
        self._max_rows = max_rows
        self._queue: list[_Request] = []
        self._queue_lock = threading.Lock()
        self.batches = 0
        """Batches run so far (for tests and logs)."""

    def submit(self, rows: list[Row], temperature: float, stop: Sequence[int]) -> list[Generation]:
        request = _Request(rows, temperature, tuple(sorted(set(stop))))
        with self._queue_lock:
            self._queue.append(request)
        while True:
            with self._lock:
                if request.done:
                    break
                self._execute(self._take())
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _take(self) -> list[_Request]:
        with self._queue_lock:
            first = self._queue[0]
            batch, rows = [], 0
            for request in self._queue:
                same = (request.temperature, request.stop) == (first.temperature, first.stop)
                if same and (not batch or rows + len(request.rows) <= self._max_rows):
                    batch.append(request)
                    rows += len(request.rows)
            self._queue = [request for request in self._queue if request not in batch]
        return batch

    def _execute(self, batch: list[_Request]) -> None:
        rows = [row for request in batch for row in request.rows]
        self.batches += 1
        try:
            generations = self._run(rows, batch[0].temperature, batch[0].stop)
        except BaseException as error:  # every caller of the batch sees the failure
            for request in batch:
                request.error, request.done = error, True
            return
        start = 0
        for request in batch:
            request.result = generations[start : start + len(request.rows)]
            start += len(request.rows)
            request.done = True


class BatchedEngine:
    """What both engines share: ``generate`` checks the request and hands its prompts to
    the engine's :class:`RequestBatcher` (``self._batcher``), which runs them, merged
    with other threads' calls, through the engine's ``_run_batch``."""

    _batcher: RequestBatcher

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        temperature: float,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
    ) -> list[Generation]:
        """Sample a continuation of every prompt; with a ``seed``, prompt ``i`` is
        sampled with ``seed + i`` (the module's convention)."""
        _check_request(prompts, max_tokens, temperature)
        if not prompts:
            return []
        rows = [
            Row(list(prompt), max_tokens, None if seed is None else seed + index)
            for index, prompt in enumerate(prompts)
        ]
        return self._batcher.submit(rows, temperature, stop_token_ids)


# --------------------------------------------------------------------------------------------
# transformers (CPU, in process)


def load_full_state_dict(model: torch.nn.Module, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Load a full (gathered) state dict into ``model``. A key the model does not have is
    an error; a missing key is allowed only for a parameter tied to one that is given (the
    LM head of tied-embedding models, which the trainer sends once)."""
    result = model.load_state_dict(dict(state_dict), strict=False)
    own = model.state_dict()
    given = {tensor.data_ptr() for name, tensor in own.items() if name in state_dict}
    missing = [k for k in result.missing_keys if own[k].data_ptr() not in given]
    if result.unexpected_keys or missing:
        raise ValueError(
            "the state dict does not match the model: "
            f"unexpected {sorted(result.unexpected_keys)[:5]}, missing {missing[:5]}"
        )


class TransformersEngine(BatchedEngine):
    """Sampling with a transformers causal LM in this process (the CPU path).

    The engine owns a private copy of the model: the trainer's optimizer steps reach
    generation only through :meth:`update_weights`, as with a separate inference server.
    Sampling is our own KV-cached loop rather than ``model.generate``, so the returned
    log-probs are exactly those of the distribution sampled from (``generate`` would also
    apply its default top-k of 50). Calls are serialised by a lock, so rollout threads
    and a trainer thread can share one engine.
    """

    def __init__(
        self,
        model: str | Path | PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        dtype: torch.dtype | None = None,
        max_batch_rows: int = 64,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        if isinstance(model, (str, Path)):
            self.model = AutoModelForCausalLM.from_pretrained(
                str(model), dtype=dtype or torch.float32
            )
        else:
            self.model = copy.deepcopy(model)  # keeps tied weights tied
            if dtype is not None:
                self.model.to(dtype)
        self.model.eval()
        self.model.requires_grad_(False)
        pad = self.model.config.pad_token_id
        if pad is None and tokenizer is not None:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else None
            pad = pad if pad is not None else tokenizer.eos_token_id
        self.pad_token_id = int(pad) if pad is not None else 0
        self.policy_version = 0
        self._lock = threading.Lock()
        self._batcher = RequestBatcher(self._run_batch, self._lock, max_batch_rows)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _run_batch(
        self, rows: list[Row], temperature: float, stop: tuple[int, ...]
    ) -> list[Generation]:
        import torch

        with torch.inference_mode():
            return self._sample(rows, temperature, set(stop))

    def _sample(self, batch: list[Row], temperature: float, stop: set[int]) -> list[Generation]:
        import torch

        device = self.device
        prompts = [row.prompt for row in batch]
        rows, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((rows, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((rows, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        # Left padding: each row's positions count its real tokens only, as if unpadded.
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        generators = []
        for row in batch:
            generator = torch.Generator(device=device)
            if row.seed is None:
                generator.seed()
            else:
                generator.manual_seed(row.seed)
            generators.append(generator)

        tokens: list[list[int]] = [[] for _ in range(rows)]
        logprobs: list[list[float]] = [[] for _ in range(rows)]
        finished = [False] * rows
        output = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
        )
        next_position = position_ids[:, -1:] + 1
        budgets = [row.max_tokens for row in batch]
        stopped = [False] * rows
        for _ in range(max(budgets)):
            logits = output.logits[:, -1, :].float()
            # μ: the distribution sampled from. Greedy (T = 0) reports softmax(logits).
            log_mu = torch.log_softmax(logits / temperature if temperature > 0 else logits, -1)
            if temperature > 0:
                chosen = _inverse_cdf_sample(log_mu, generators)
            else:
                chosen = log_mu.argmax(-1)
            picked = log_mu.gather(-1, chosen[:, None])[:, 0]
            for row, (token_id, logprob) in enumerate(
                zip(chosen.tolist(), picked.tolist(), strict=True)
            ):
                if finished[row]:
                    continue
                tokens[row].append(token_id)
                logprobs[row].append(logprob)
                stopped[row] = token_id in stop
                finished[row] = stopped[row] or len(tokens[row]) == budgets[row]
            if all(finished):
                break
            # Finished rows keep decoding in the batch; what they sample is dropped.
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((rows, 1))], -1)
            output = self.model(
                input_ids=chosen[:, None],
                attention_mask=attention_mask,
                position_ids=next_position,
                cache=output.cache,  # transformers 5.24's name for past_key_values
                use_cache=True,
            )
            next_position = next_position + 1
        return [
            Generation(ids, lps, "stop" if done else "length")
            for ids, lps, done in zip(tokens, logprobs, stopped, strict=True)
        ]

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy the trainer's weights into the engine's model (names as in ``state_dict()``).

        See :func:`load_full_state_dict` for which keys may be missing.
        """
        from tmax.rl.weights.streaming import stream_state_dict

        stream_state_dict(state_dict, self.weight_sink(version))

    def weight_sink(self, version: int) -> WeightSink:
        from tmax.rl.weights.streaming import LoadingSink

        def done() -> None:
            self.policy_version = version
            log.debug("transformers engine now at policy version %d", version)

        return LoadingSink(self.model, done, lock=self._lock)


def _inverse_cdf_sample(log_mu: torch.Tensor, generators: Sequence[torch.Generator]) -> Any:
    """One token per row from exp(log_mu), by inverse CDF with one uniform draw per row
    from that row's own generator (so a row's sample ignores the rest of the batch).

    The first index whose cumulative probability exceeds u · total: a token of
    probability 0 is never chosen. The CDF is summed in float64 (large vocabularies).
    """
    import torch

    uniform = torch.stack(
        [torch.rand((), generator=g, device=log_mu.device, dtype=torch.float64) for g in generators]
    )
    cdf = log_mu.double().exp().cumsum(-1)
    target = (uniform * cdf[:, -1])[:, None]
    chosen = torch.searchsorted(cdf, target, right=True)[:, 0]
    return chosen.clamp_(max=log_mu.shape[-1] - 1)


# --------------------------------------------------------------------------------------------

ENGINES = ("transformers", "vllm")
"""``rl.engine``: :class:`TransformersEngine` in the training process, or vLLM's servers
(:class:`tmax.rl.engines.remote.VLLMEngine`)."""
