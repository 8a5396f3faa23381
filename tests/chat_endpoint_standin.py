"""A local stand-in for an OpenAI-compatible chat-completions server (no real endpoint is
reachable from the tests): it grades an answer by its number of words, capped at 10 (also
in FastChat's MT-Bench prompt forms), and prefers the longer of two answers. Asked with
AlpacaEval's classifier prompt (``alpaca_eval_clf``), it answers as GPT-4 Turbo does there:
one token with its top log-probabilities, P(the longer output's identifier) = 0.8, or 0.5
for outputs of equal length. Asked anything else, it generates as a model would: ``n``
choices, each as many words as the prompt's "word count of N words" asks (else as many as the
prompt has), choice k's words all ``s{k}``, cut to ``max_tokens`` words (finish reason
``length``). It records every request it saw, headers included. Statuses put in
``failures`` answer the next requests instead, one each (429 with a Retry-After of 20 ms, as
rate-limiting APIs send; a 401 quotes the refused key, as OpenAI's does), before it answers
again; payloads put in ``replies`` answer the next requests (status 200) the same way,
malformed ones included. Its replies name the model asked for, unless ``served_as`` gives the
``model`` (and ``system_fingerprint``) they name instead, as an API serving another snapshot
under an alias does."""

from __future__ import annotations

import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class ChatEndpointStandIn(BaseHTTPRequestHandler):
    seen: list[dict] = []
    failures: list[int] = []
    replies: list[dict] = []
    served_as: dict = {}

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatEndpointStandIn.seen.append(
            {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
        )
        if ChatEndpointStandIn.failures:
            status = ChatEndpointStandIn.failures.pop(0)
            message = f"stand-in answers {status}"
            if status == 401:  # as OpenAI's does, quoting the refused key
                message += (
                    f": incorrect API key provided: {self.headers.get('Authorization', '').removeprefix('Bearer ')}"
                )
            self._reply(
                status,
                {"error": {"message": message, "type": "stand_in", "code": None}},
                {"retry-after-ms": "20"} if status == 429 else {},
            )
            return
        if ChatEndpointStandIn.replies:
            self._reply(200, ChatEndpointStandIn.replies.pop(0))
            return
        prompt = body["messages"][-1]["content"]
        logprobs = None
        if '"model_identifier": "m"' in prompt:
            content, logprobs = _alpaca_eval_verdict(prompt)
        elif "Answer (a):" in prompt:
            first = prompt.split("Answer (a):\n", 1)[1].split("\n\nAnswer (b):", 1)[0]
            second = prompt.split("Answer (b):\n", 1)[1].split("\n\nReply with", 1)[0]
            content = "a" if len(first) >= len(second) else "b"
        elif "UNPARSEABLE" in prompt:
            content = "I cannot say."
        elif "### Assistant A:\n" in prompt:  # FastChat's second-turn form: the last answer
            last_answer = prompt.rsplit("### Assistant A:\n", 1)[1].split("\n\n<|The End", 1)[0]
            content = f"Fine. [{min(10, len(last_answer.split()))}]"  # FastChat's backup pattern
        elif "[The Start of Assistant's Answer]" in prompt:
            last_answer = prompt.split("[The Start of Assistant's Answer]\n", 1)[1].split("\n[The End", 1)[0]
            content = f"Fine. Rating: [[{min(10, len(last_answer.split()))}]]"
        elif "[ASSISTANT]\n" not in prompt:
            self._reply(200, _completion(body, _generated(body, prompt)))
            return
        else:
            last_answer = prompt.rsplit("[ASSISTANT]\n", 1)[1]
            content = f"Reasonable. Rating: [[{min(10, len(last_answer.split()))}]]"
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": content},
            "logprobs": logprobs,
        }
        self._reply(200, _completion(body, [choice]))

    def _reply(self, status: int, payload: dict, headers: dict | None = None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            **(headers or {}),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _completion(body: dict, choices: list[dict]) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        **ChatEndpointStandIn.served_as,
    }


WORD_COUNT = re.compile(r"word count of (?:more than )?(\d+) words")


def _generated(body: dict, prompt: str) -> list[dict]:
    """``n`` choices of as many words as the prompt asks for, cut at ``max_tokens`` words."""
    asked = WORD_COUNT.search(prompt)
    words = int(asked.group(1)) if asked else len(prompt.split())
    limit = body.get("max_tokens") or words
    return [
        {
            "index": k,
            "finish_reason": "length" if words > limit else "stop",
            "message": {"role": "assistant", "content": " ".join([f"s{k}"] * min(words, limit))},
            "logprobs": None,
        }
        for k in range(body.get("n") or 1)
    ]


def _alpaca_eval_verdict(prompt: str) -> tuple[str, dict]:
    """The identifier of the longer output (m: the first shown) and the top log-probabilities
    of the one token AlpacaEval's weighted annotator reads."""
    first = prompt.split('"model_identifier": "m",\n        "output": """', 1)[1].split('"""', 1)[0]
    second = prompt.split('"model_identifier": "M",\n        "output": """', 1)[1].split('"""', 1)[0]
    p_first = 0.5 if len(first) == len(second) else 0.8 if len(first) > len(second) else 0.2
    top = [
        {"token": "m", "logprob": math.log(p_first), "bytes": [109]},
        {"token": "M", "logprob": math.log(1 - p_first), "bytes": [77]},
    ]
    top.sort(key=lambda t: -t["logprob"])
    return top[0]["token"], {"content": [{**top[0], "top_logprobs": top}]}


@pytest.fixture()
def chat_endpoint():
    """The stand-in's base URL, for the length of one test."""
    ChatEndpointStandIn.seen, ChatEndpointStandIn.failures, ChatEndpointStandIn.replies = [], [], []
    ChatEndpointStandIn.served_as = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatEndpointStandIn)
    # A short poll: shutting the server down waits for one.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
