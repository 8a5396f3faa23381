"""A local stand-in for an OpenAI-compatible chat-completions server (no real endpoint is
reachable from the tests): it grades an answer by its number of words, capped at 10 (also
in FastChat's MT-Bench prompt forms), and prefers the longer of two answers. It records every request it saw, headers included."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class ChatEndpointStandIn(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatEndpointStandIn.seen.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                         "body": body})
        prompt = body["messages"][-1]["content"]
        if "Answer (a):" in prompt:
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
        else:
            last_answer = prompt.rsplit("[ASSISTANT]\n", 1)[1]
            content = f"Reasonable. Rating: [[{min(10, len(last_answer.split()))}]]"
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def chat_endpoint():
    """The stand-in's base URL, for the length of one test."""
    ChatEndpointStandIn.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatEndpointStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
