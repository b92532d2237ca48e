"""``transformers serve`` as the workflow runs it: ``python -m tmax.models.transformers_serve
serve MODEL ...`` takes the ``transformers`` command's arguments and changes two things.

- **A reply the server cannot parse is the model's, not the server's.** Upstream, a
  ``<tool_call>`` whose body is not JSON makes the chat endpoint raise and answer HTTP
  500, which a client can only count as an infrastructure failure. Here the reply comes
  back as plain content with no tool call, as vLLM's parsers return it, and the harness
  counts it as a format error.
- **The request decides how to sample.** The served model's saved generation config
  keeps its stop tokens and lengths, but its sampling settings are reset to the OpenAI
  API's defaults (sample at temperature 1 from the whole distribution): upstream, a
  checkpoint saved with ``do_sample: false`` is greedy whatever temperature a request
  asks for, and one with ``top_k: 20`` cuts every request's distribution. A request's
  ``temperature`` (0: greedy), ``top_p`` and ``seed`` then apply as sent.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

log = logging.getLogger("tmax.models")

SAMPLING_DEFAULTS = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0,
                     "min_p": None, "typical_p": 1.0, "repetition_penalty": 1.0}  # fmt: skip
"""What every request starts from: the OpenAI API's sampling, nothing from the checkpoint."""


def request_decides_sampling(generation_config: Any) -> Any:
    """``generation_config`` (changed in place, and returned) with the checkpoint's
    sampling settings replaced by :data:`SAMPLING_DEFAULTS`."""
    for key, value in SAMPLING_DEFAULTS.items():
        setattr(generation_config, key, value)
    return generation_config


def lenient_parse(parse: Any) -> Any:
    """``parse_assistant_message`` that answers an unparsable reply with its raw text
    (no tool calls) instead of raising."""

    @functools.wraps(parse)
    def parse_or_keep_text(processor: Any, model: Any, generated_ids: Any, input_ids: Any,
                           cleaned_content: str = "", tools: Any = None) -> Any:  # fmt: skip
        try:
            return parse(processor, model, generated_ids, input_ids, cleaned_content, tools)
        except ValueError as error:
            log.warning("the model's reply could not be parsed (%s): returned as text", error)
            tokenizer = getattr(processor, "tokenizer", processor)
            ids = generated_ids.tolist() if hasattr(generated_ids, "tolist") else generated_ids
            if ids and isinstance(ids[0], list):
                ids = ids[0]
            return tokenizer.decode(ids, skip_special_tokens=True), None, None

    return parse_or_keep_text


def patch() -> None:
    """Install both changes in the serving modules (before the server starts)."""
    from transformers.cli.serving import chat_completion, response, utils

    lenient = lenient_parse(utils.parse_assistant_message)
    chat_completion.parse_assistant_message = lenient
    response.parse_assistant_message = lenient
    original = utils.BaseHandler._build_generation_config

    @functools.wraps(original)
    def build(self: Any, body: dict, model_generation_config: Any, use_cb: bool = False) -> Any:
        if body.get("generation_config") is None:  # a request's own config is taken as sent
            copy = model_generation_config.__class__.from_dict(model_generation_config.to_dict())
            model_generation_config = request_decides_sampling(copy)
        return original(self, body, model_generation_config, use_cb=use_cb)

    utils.BaseHandler._build_generation_config = build


def main() -> int:
    patch()
    from transformers.cli.transformers import main as transformers_main

    sys.argv[0] = "transformers"
    return int(transformers_main() or 0)


if __name__ == "__main__":
    sys.exit(main())
