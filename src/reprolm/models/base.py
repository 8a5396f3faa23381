"""Base models downloaded from the hub (those built and pretrained locally:
:mod:`reprolm.train.pretrain`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from reprolm.io import atomic_path
from reprolm.paths import REMOTE_CODE_MARKER
from reprolm.pins import pinned_commit
from reprolm.provenance.records import note_read

log = logging.getLogger(__name__)


def download_base_model(hub: Mapping, output: str) -> None:
    """A hub checkpoint's files (weights, config, tokenizer) into ``output``; with
    ``chat_template_from``, the chat template of that tokenizer (hub id or path) replaces the
    checkpoint's own, as studies that train a base model on an instruct model's template do;
    with ``trust_remote_code``, its Python files come too and its own code may run later.
    Read at the commit the lock gives as ``revision`` (an unpinned run: the one the hub serves
    now), which the step's record names (``read``)."""
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
    revision = pinned_commit("model", hub["path"], hub.get("revision"))
    with atomic_path(output) as tmp:
        # A checkpoint's own modelling code only where the config opted in.
        snapshot_download(
            repo_id=hub["path"],
            revision=revision,
            local_dir=str(tmp),
            allow_patterns=patterns + (["*.py"] if hub.get("trust_remote_code") else []),
        )
        if not any(tmp.glob("*.safetensors")):
            raise ValueError(
                f"base model {hub['path']} (revision {revision or 'main'}): the hub gave no .safetensors weights"
                f"{' (it ships PyTorch .bin files)' if any(tmp.glob('*.bin')) else ''}; convert them to safetensors "
                "(`save_pretrained(DIR, safe_serialization=True)`) and point the config's hub path at the copy; "
                "`reprolm rehearse` checks every base model's files before a run"
            )
        note_read({"kind": "model", "repo": hub["path"], "revision": revision})
        if hub.get("trust_remote_code"):
            (tmp / REMOTE_CODE_MARKER).write_text(f"{hub['path']}: base_models.*.hub.trust_remote_code is true\n")
        if hub.get("chat_template_from"):
            adopt_chat_template(str(tmp), hub["chat_template_from"], hub.get("chat_template_revision"))


def adopt_chat_template(model_dir: str, source: str, revision: str | None = None) -> None:
    """Saves ``source``'s chat template as the template of the tokenizer in ``model_dir``,
    changing nothing else of it: the template goes to ``chat_template.jinja`` (where
    transformers reads it) and any other copy of it is removed, instead of re-saving the
    tokenizer (which would rewrite its config with load-time settings)."""
    import json
    from pathlib import Path

    from transformers import AutoTokenizer

    if revision:
        note_read({"kind": "model", "repo": source, "revision": revision, "read_for": "chat template"})
    template = AutoTokenizer.from_pretrained(source, revision=revision).chat_template
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
