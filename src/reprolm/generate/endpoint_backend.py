"""Generation through an OpenAI-compatible chat-completions endpoint: a closed model's API
(OpenAI's, Anthropic's OpenAI-compatible one) or a researcher's own vLLM or TGI server
(``/v1/chat/completions``).

A base model with an ``endpoint`` has no weights here. The endpoint renders its own chat
template, so it is sent each prompt's messages (the prompt builders' conversations, which the
other backends put through the model's template) with the request's sampling: temperature,
top-p, ``max_new_tokens`` as ``max_tokens``, ``n`` choices, the prompt set's stop strings,
the seed, and top-k and the penalties where they are set (OpenAI's own API refuses top-k;
vLLM's and TGI's servers take it). An endpoint's ``sampling`` replaces settings of every
prompt set for that model (the original Ruler asked its closed models at the APIs' default
temperature). Requests go out ``max_concurrency`` at a time; the openai client retries
transient failures (no connection, a timeout, HTTP 408, 409, 429, 5xx) with exponential
backoff or after the server's Retry-After, ``max_retries`` times.

The API key is read from the environment variable the config names and is never written
anywhere: the config, logs, errors and provenance hold only the variable's name.

An API model cannot be pinned the way a hub checkpoint is: each reply's ``model`` (the
snapshot the API served) and ``system_fingerprint`` (its serving configuration) are counted
(:meth:`ChatEndpointBackend.served`), for the generation's provenance record.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from reprolm.generate.request import SamplingParams
from reprolm.progress import ProgressCounter

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8
DEFAULT_MAX_RETRIES = 5
DEFAULT_TIMEOUT_S = 600.0
# How much of a prompt an error quotes to name its request.
QUOTED_CHARS = 60


class EndpointError(RuntimeError):
    """A request the endpoint refused or answered without what generation needs."""


class ChatEndpointBackend:
    # The endpoint renders its own chat template: prompts reach it as messages, not token ids.
    tokenizer = None

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str,
        api_key_env: str,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        sampling: Mapping | None = None,
    ):
        """``name``: the base model's key under ``base_models`` (errors name it)."""
        from openai import OpenAI

        self.name, self.base_url, self.model = name, base_url, model
        self.where = f"base model {name!r} ({model!r} at {base_url})"
        key = os.environ.get(api_key_env)
        if not key:
            raise EndpointError(f"{self.where}: environment variable {api_key_env!r} (its API key) is not set")
        self._key = key
        self.client = OpenAI(base_url=base_url, api_key=key, max_retries=max_retries, timeout=timeout_s)
        self.max_concurrency, self.max_retries = max_concurrency, max_retries
        self.sampling_overrides = dict(sampling or {})
        # (served model, system fingerprint) -> replies, counted across the request threads.
        self._served: Counter = Counter()
        self._served_lock = threading.Lock()

    def served(self) -> dict:
        """The model ids and system fingerprints the API's replies named, with how many
        replies named each, beside the configured model."""
        with self._served_lock:
            counted = sorted(self._served.items(), key=lambda item: (str(item[0][0]), str(item[0][1])))
        return {
            "configured_model": self.model,
            "served": [
                {"model": model, "system_fingerprint": fingerprint, "replies": replies}
                for (model, fingerprint), replies in counted
            ],
        }

    def describe(self) -> dict:
        """What the records may say of the endpoint: never the key."""
        return {"base_url": self.base_url, "model": self.model, "sampling": self.sampling_overrides}

    def chat(
        self,
        conversations: Sequence[list[dict]],
        sampling: SamplingParams,
        *,
        stop: Sequence[str] = (),
        labels: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """``n`` answers to each conversation, in conversation order. ``labels`` name the
        requests in errors (the prompt set's file and row)."""
        return self.chat_with_limits(conversations, sampling, stop=stop, labels=labels)[0]

    def chat_with_limits(
        self,
        conversations: Sequence[list[dict]],
        sampling: SamplingParams,
        *,
        stop: Sequence[str] = (),
        labels: Sequence[str] | None = None,
    ) -> tuple[list[list[str]], list[list[bool]]]:
        """The answers of :meth:`chat`, and for each whether it ran to ``max_new_tokens``
        (the API's finish reason ``length``)."""
        sampling = dataclasses.replace(sampling, **self.sampling_overrides)
        labels = list(labels) if labels is not None else [f"prompt {i}" for i in range(len(conversations))]
        progress = ProgressCounter(
            f"{self.where}: {len(conversations)} prompts", len(conversations), unit="requests", logger=log
        )
        answers: list[list[str]] = []
        limits: list[list[bool]] = []
        pool = ThreadPoolExecutor(max_workers=self.max_concurrency)
        try:
            pending = [
                pool.submit(self._send, messages, sampling, stop, label)
                for messages, label in zip(conversations, labels, strict=True)
            ]
            for future in pending:
                texts, ran_on = future.result()
                answers.append(texts)
                limits.append(ran_on)
                progress.advance()
        finally:
            # A failed request ends the job: the requests not yet sent are not sent.
            pool.shutdown(cancel_futures=True)
        return answers, limits

    def request_body(self, messages: list[dict], sampling: SamplingParams, stop: Sequence[str]) -> dict:
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "n": sampling.n,
            "seed": sampling.seed,
        }
        if stop:
            body["stop"] = list(stop)
        if sampling.presence_penalty:
            body["presence_penalty"] = sampling.presence_penalty
        if sampling.frequency_penalty:
            body["frequency_penalty"] = sampling.frequency_penalty
        if sampling.top_k:
            body["extra_body"] = {"top_k": sampling.top_k}
        return body

    def _send(
        self, messages: list[dict], sampling: SamplingParams, stop: Sequence[str], label: str
    ) -> tuple[list[str], list[bool]]:
        """The reply's choices in order: their texts, and whether each ran to the token limit."""
        import openai

        request = f"the request for {label} ({_quoted(messages)})"
        try:
            reply = self.client.chat.completions.create(**self.request_body(messages, sampling, stop))
        except (openai.APIStatusError, openai.APIConnectionError) as error:
            # Not chained: the client's error repeats the endpoint's body, which may quote the key.
            raise self._failure(error, request) from None
        choices = getattr(reply, "choices", None)
        if not choices:
            raise EndpointError(f"{self.where}: the reply to {request} has no 'choices': {_shown(reply)}")
        if len(choices) != sampling.n:
            raise EndpointError(
                f"{self.where}: the reply to {request} has {len(choices)} choices for n={sampling.n} "
                "(an endpoint that samples one choice per request needs a prompt set with n: 1)"
            )
        with self._served_lock:
            self._served[(getattr(reply, "model", None), getattr(reply, "system_fingerprint", None))] += 1
        ordered = sorted(choices, key=lambda choice: choice.index)
        texts = [(choice.message.content or "") if choice.message else "" for choice in ordered]
        return texts, [choice.finish_reason == "length" for choice in ordered]

    def _failure(self, error: Exception, request: str) -> EndpointError:
        """A failed request as an error naming the model, the endpoint and the request: HTTP
        statuses and connection failures say whether they were retried. The key is masked."""
        import openai

        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            transient = status in (408, 409, 429) or status >= 500
            what = f"HTTP {status}: {error.message}"
        else:  # openai.APIConnectionError, timeouts included
            transient, what = True, f"{type(error).__name__}: {error}"
        when = f"after {self.max_retries} retries" if transient else "(not retried)"
        return EndpointError(f"{self.where}: {request} failed {when}: {what}".replace(self._key, "***"))


def _quoted(messages: list[dict]) -> str:
    text = str(messages[-1].get("content", "")) if messages else ""
    return repr(text[:QUOTED_CHARS] + ("..." if len(text) > QUOTED_CHARS else ""))


def _shown(reply) -> str:
    """A reply as the endpoint sent it, shortened for an error message."""
    text = json.dumps(reply.model_dump(exclude_unset=True)) if hasattr(reply, "model_dump") else repr(reply)
    return text[:300]
