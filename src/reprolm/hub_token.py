"""Where the workflow's processes find the hub cache and the user's hub token.

The workflow keeps the hub cache in the project (``HF_HOME=resources/hf_home``), and
huggingface_hub looks for the token at ``$HF_HOME/token``; ``huggingface-cli login`` (or
``hf auth login``) writes it under the HF home the user had, by default
``~/.cache/huggingface/token``. ``HF_TOKEN_PATH`` points huggingface_hub at that file, so a
gated model downloads after the documented login. Only the path is ever set or recorded,
never the token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The variables that already tell huggingface_hub which token to use.
TOKEN_VARIABLES = ("HF_TOKEN", "HF_TOKEN_PATH")


def user_hf_home(environ: Mapping[str, str]) -> str:
    """The HF home of ``environ`` as huggingface_hub resolves it (huggingface_hub.constants)."""
    if environ.get("HF_HOME"):
        return os.path.expanduser(environ["HF_HOME"])
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.expanduser(cache), "huggingface")


def hub_environment(environ: Mapping[str, str], project_hf_home: str) -> dict[str, str]:
    """The variables to set in ``environ`` for the workflow: ``HF_HOME`` the project's unless
    one is set; ``HF_TOKEN_PATH`` the login token of the user's own HF home, where that file
    exists, neither HF_TOKEN nor HF_TOKEN_PATH is set, and HF_HOME moves away from it (a login
    made with the project's HF_HOME is found there without it)."""
    if environ.get("HF_HOME"):
        return {}
    variables = {"HF_HOME": project_hf_home}
    login_token = os.path.join(user_hf_home(environ), "token")
    if not any(environ.get(name) for name in TOKEN_VARIABLES) and os.path.isfile(login_token):
        variables["HF_TOKEN_PATH"] = login_token
    return variables
