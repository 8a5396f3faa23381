"""Base models downloaded from the hub (those built and pretrained locally:
:mod:`reprolm.train.pretrain`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from reprolm.io import atomic_path
from reprolm.paths import REMOTE_CODE_MARKER

log = logging.getLogger(__name__)


def download_base_model(hub: Mapping, output: str) -> None:
    """A hub checkpoint's files (weights, config, tokenizer) into ``output``; with
    ``chat_template_from``, the chat template of that tokenizer (hub id or path) replaces the
    checkpoint's own, as studies that train a base model on an instruct model's template do;
    with ``trust_remote_code``, its Python files come too and its own code may run later."""
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
    with atomic_path(output) as tmp:
        # A checkpoint's own modelling code only where the config opted in.
        snapshot_download(
            repo_id=hub["path"],
            revision=hub.get("revision"),
            local_dir=str(tmp),
            allow_patterns=patterns + (["*.py"] if hub.get("trust_remote_code") else []),
        )
        if hub.get("trust_remote_code"):
            (tmp / REMOTE_CODE_MARKER).write_text(f"{hub['path']}: base_models.*.hub.trust_remote_code is true\n")
        if hub.get("chat_template_from"):
            adopt_chat_template(str(tmp), hub["chat_template_from"])


def adopt_chat_template(model_dir: str, source: str) -> None:
    """Saves ``source``'s chat template as the template of the tokenizer in ``model_dir``,
    changing nothing else of it: the template goes to ``chat_template.jinja`` (where
    transformers reads it) and any other copy of it is removed, instead of re-saving the
    tokenizer (which would rewrite its config with load-time settings)."""
    import json
    from pathlib import Path

    from transformers import AutoTokenizer

    template = AutoTokenizer.from_pretrained(source).chat_template
    if not template:
        raise ValueError(f"chat_template_from: {source!r} has no chat template")
    folder = Path(model_dir)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    if config.pop("chat_template", None) is not None:
        config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    (folder / "chat_template.json").unlink(missing_ok=True)
    (folder / "chat_template.jinja").write_text(template)
    log.info("chat template of %s adopted", source)
