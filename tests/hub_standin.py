"""Local stand-ins for the hub and the file servers a lock reads (no network here).

``HubAPIStandIn``: huggingface_hub's ``HfApi.model_info`` and ``dataset_info`` answer each
known repository's current commit (changed by the test to move it upstream), and raise what
huggingface_hub raises for the hub's 404 answers otherwise (with ``any_repo``, every repository
is known, at a commit of its name); its access check (``HfApi.auth_check``) answers the hub's
403 for the repositories in ``gated`` (a licence not accepted), the same 404 for unknown ones
and nothing for the rest. ``FileServerStandIn``: urllib's opener, as
``urllib.request.urlopen`` uses it, serves each known URL's bytes with an ETag of their
content (with ``any_url``, every URL serves its own address as its bytes), and counts GETs
and HEADs."""

from __future__ import annotations

import email.message
import hashlib
import io
import urllib.error
import urllib.request
import urllib.response
from types import SimpleNamespace


class HubAPIStandIn:
    def __init__(
        self, monkeypatch, commits: dict[tuple[str, str], str], any_repo: bool = False, gated: frozenset = frozenset()
    ):
        from huggingface_hub import HfApi

        self.commits, self.asked, self.any_repo, self.gated = commits, [], any_repo, gated
        monkeypatch.setattr(HfApi, "model_info", lambda api, repo, **options: self.answer("model", repo, **options))
        monkeypatch.setattr(HfApi, "dataset_info", lambda api, repo, **options: self.answer("dataset", repo, **options))
        monkeypatch.setattr(
            HfApi, "auth_check", lambda api, repo, repo_type=None, **options: self.access(repo_type, repo)
        )

    def access(self, kind: str | None, repo: str) -> None:
        from huggingface_hub.utils import hf_raise_for_status

        kind = kind or "model"
        self.asked.append((kind, repo, "auth-check"))
        if (kind, repo) in self.gated:
            hf_raise_for_status(
                self._response(403, "GatedRepo", f"https://huggingface.co/api/{kind}s/{repo}/auth-check")
            )
        elif (kind, repo) not in self.commits and not self.any_repo:
            hf_raise_for_status(
                self._response(404, "RepoNotFound", f"https://huggingface.co/api/{kind}s/{repo}/auth-check")
            )

    @staticmethod
    def _response(status: int, code: str, url: str):
        import httpx2

        return httpx2.Response(status, headers={"X-Error-Code": code}, request=httpx2.Request("GET", url))

    def answer(self, kind: str, repo: str, revision=None, timeout=None, **options):
        from huggingface_hub.utils import hf_raise_for_status

        self.asked.append((kind, repo, revision))
        if (kind, repo) in self.commits:
            return SimpleNamespace(id=repo, sha=self.commits[(kind, repo)])
        if self.any_repo:
            return SimpleNamespace(id=repo, sha=hashlib.sha1(f"{kind} {repo}".encode()).hexdigest())
        hf_raise_for_status(self._response(404, "RepoNotFound", f"https://huggingface.co/api/{kind}s/{repo}"))


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


NLTK_INDEX = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/index.xml"


def nltk_index(package: str, url: str) -> bytes:
    """NLTK's package index, listing one package at ``url``."""
    return (
        f'<?xml version="1.0"?><nltk_data><packages><package id="{package}" url="{url}" subdir="tokenizers" '
        f'size="1" unzipped_size="1" unzip="1"/></packages><collections/></nltk_data>'
    ).encode()
