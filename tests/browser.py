"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe: no
browser download, no websocket library."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time


class BrowserError(RuntimeError):
    pass


class Chromium:
    """A headless Chromium; :meth:`send` one DevTools command and wait for its answer."""

    def __init__(self) -> None:
        binary = shutil.which("chromium")
        if binary is None:
            raise FileNotFoundError("chromium")
        self._profile = tempfile.TemporaryDirectory()
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def as_devtools_pipe() -> None:
            # Chromium reads commands from fd 3 and writes answers to fd 4; duplicated first,
            # since the pipes may already hold those numbers.
            read, write = os.dup(commands_read), os.dup(answers_write)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self._process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",  # tests run as root
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            close_fds=False,
            preexec_fn=as_devtools_pipe,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._last_id = 0

    def send(self, method: str, session: str | None = None, **params) -> dict:
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._answers, 1 << 16)
                if not chunk:
                    raise BrowserError(f"chromium closed the pipe during {method}")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._last_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer["result"]

    def open(self, url: str) -> str:
        """A new tab at ``url``; its session id."""
        target = self.send("Target.createTarget", url=url)["targetId"]
        return self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def evaluate(self, session: str, expression: str, context: int | None = None):
        """The JSON value of a JavaScript expression in the page (or the execution
        ``context``, e.g. a frame's)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        result = self.send("Runtime.evaluate", session, **params)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float = 20.0, context: int | None = None):
        """The value of ``expression`` once it is truthy (the page's scripts have rendered)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(session, expression, context)
            except BrowserError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def frame_context(self, session: str, frame_id: str) -> int:
        """An execution context in a frame (an iframe of another origin included)."""
        return self.send("Page.createIsolatedWorld", session, frameId=frame_id)["executionContextId"]

    def child_frames(self, session: str) -> list[dict]:
        tree = self.send("Page.getFrameTree", session)["frameTree"]
        return [child["frame"] for child in tree.get("childFrames", [])]

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._answers)
        self._profile.cleanup()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
