"""Local stand-ins for the hub and the file servers a lock reads (no network here).

``HubAPIStandIn``: huggingface_hub's ``HfApi.model_info`` and ``dataset_info`` answer each
known repository's current commit (changed by the test to move it upstream), and raise what
huggingface_hub raises for the hub's 404 answers otherwise (with ``any_repo``, every repository
is known, at a commit of its name). ``FileServerStandIn``: urllib's opener, as
``urllib.request.urlopen`` uses it, serves each known URL's bytes with an ETag of their
content (with ``any_url``, every URL serves its own address as its bytes), and counts GETs
and HEADs. ``HubServerStandIn``: a local HTTP server in the hub's place (huggingface_hub's
``ENDPOINT`` pointed at it) answering the hub's access check as the hub does: 200 for a
repository the token may download, 403 with ``X-Error-Code: GatedRepo`` for a gated one whose
licence it has not accepted, 404 ``RepoNotFound`` for the rest; it records the paths asked."""

from __future__ import annotations

import email.message
import hashlib
import io
import json
import threading
import urllib.error
import urllib.request
import urllib.response
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace


class HubAPIStandIn:
    def __init__(self, monkeypatch, commits: dict[tuple[str, str], str], any_repo: bool = False):
        from huggingface_hub import HfApi

        self.commits, self.asked, self.any_repo = commits, [], any_repo
        monkeypatch.setattr(HfApi, "model_info", lambda api, repo, **options: self.answer("model", repo, **options))
        monkeypatch.setattr(HfApi, "dataset_info", lambda api, repo, **options: self.answer("dataset", repo, **options))

    def answer(self, kind: str, repo: str, revision=None, timeout=None, **options):
        import httpx2
        from huggingface_hub.utils import hf_raise_for_status

        self.asked.append((kind, repo, revision))
        if (kind, repo) in self.commits:
            return SimpleNamespace(id=repo, sha=self.commits[(kind, repo)])
        if self.any_repo:
            return SimpleNamespace(id=repo, sha=hashlib.sha1(f"{kind} {repo}".encode()).hexdigest())
        url = f"https://huggingface.co/api/{kind}s/{repo}"
        response = httpx2.Response(404, headers={"X-Error-Code": "RepoNotFound"}, request=httpx2.Request("GET", url))
        hf_raise_for_status(response)


class FileServerStandIn(urllib.request.BaseHandler):
    handler_order = 100  # before urllib's own HTTP(S) handlers

    def __init__(self, monkeypatch, files: dict[str, bytes], any_url: bool = False):
        self.files, self.gets, self.heads, self.any_url = files, [], [], any_url
        monkeypatch.setattr(urllib.request, "_opener", urllib.request.build_opener(self))

    def https_open(self, request):
        url = request.full_url
        if self.any_url and url not in self.files:
            self.files[url] = url.encode()
        if url not in self.files:
            raise urllib.error.HTTPError(url, 404, "Not Found (stand-in)", email.message.Message(), io.BytesIO())
        body = self.files[url]
        headers = email.message.Message()
        headers["ETag"] = f'"{hashlib.sha1(body).hexdigest()}"'
        headers["Content-Length"] = str(len(body))
        if request.get_method() == "HEAD":
            self.heads.append(url)
            body = b""
        else:
            self.gets.append(url)
        response = urllib.response.addinfourl(io.BytesIO(body), headers, url, 200)
        response.msg = "OK"
        return response

    http_open = https_open


class HubServerStandIn:
    """``files``: a model repository's file names as the hub lists them (its model info);
    one not named lists ``model.safetensors``."""

    def __init__(
        self,
        monkeypatch,
        open_repos: set[tuple[str, str]],
        gated: set[tuple[str, str]],
        files: dict[str, list[str]] | None = None,
    ):
        from huggingface_hub import constants

        self.open_repos, self.gated, self.files, self.asked = open_repos, gated, files or {}, []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                stand_in.asked.append(self.path)
                path = self.path.split("?", 1)[0]
                kinds, _, rest = path.removeprefix("/api/").partition("/")
                repo = rest.removesuffix("/auth-check").split("/revision/", 1)[0]
                key = (kinds.removesuffix("s"), repo)
                status, code = (200, "") if key in stand_in.open_repos else (404, "RepoNotFound")
                if key in stand_in.gated:
                    status, code = 403, "GatedRepo"
                body = b"{}"
                if status == 200 and not path.endswith("/auth-check"):
                    names = stand_in.files.get(repo, ["config.json", "model.safetensors"])
                    body = json.dumps({"id": repo, "siblings": [{"rfilename": name} for name in names]}).encode()
                self.send_response(status)
                if code:
                    self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *arguments):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{self.server.server_address[1]}")
        # A host that reaches its hub, whatever this process was started with (make exports
        # HF_HUB_OFFLINE=1, which huggingface_hub reads once, at import).
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


NLTK_INDEX = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/index.xml"


def nltk_index(package: str, url: str) -> bytes:
    """NLTK's package index, listing one package at ``url``."""
    return (
        f'<?xml version="1.0"?><nltk_data><packages><package id="{package}" url="{url}" subdir="tokenizers" '
        f'size="1" unzipped_size="1" unzip="1"/></packages><collections/></nltk_data>'
    ).encode()
