"""Named chat templates a recipe can train with instead of the base model's own.

A recipe's ``chat_template`` names one: the finetune sets it on the tokenizer, adds its
special tokens (growing the embeddings) and saves both with the model, so generation and
every later finetune of that model use the same template. ``own`` keeps the base's template
(the project's generic one for a base without any). A study declares the templates its
original code trains with in ``chat_templates.yaml`` in its folder (name: ``jinja`` and
``special_tokens``); they are read here as data, so the config code, which sits below the
studies, can name them without importing one. A study outside the package registers its
own in ``CHAT_TEMPLATES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from reprolm.io import read_yaml
from reprolm.registry import Registry

# A recipe's ``chat_template`` that keeps the base model's own template.
OWN_TEMPLATE = "own"


@dataclass(frozen=True)
class ChatTemplate:
    jinja: str
    # Tokens the template writes that must each be one special token.
    special_tokens: tuple[str, ...] = ()


CHAT_TEMPLATES: Registry[ChatTemplate] = Registry("chat template")
STUDY_TEMPLATE_FILES = Path(__file__).resolve().parents[1] / "studies"
TEMPLATE_FILE = "chat_templates.yaml"


@cache
def _register_study_templates() -> None:
    for path in sorted(STUDY_TEMPLATE_FILES.glob(f"*/{TEMPLATE_FILE}")):
        for name, entry in read_yaml(path).items():
            if not isinstance(entry, dict) or not isinstance(entry.get("jinja"), str):
                raise ValueError(f"{path}: template {name!r} needs a 'jinja' text (and may list 'special_tokens')")
            CHAT_TEMPLATES.register(name, ChatTemplate(entry["jinja"], tuple(entry.get("special_tokens", ()))))


def template_names() -> list[str]:
    """What a recipe's ``chat_template`` may name."""
    _register_study_templates()
    return [OWN_TEMPLATE, *CHAT_TEMPLATES.names()]


def named_template(name: str | None, where: str | None = None) -> ChatTemplate | None:
    """The template ``name`` stands for; None for ``own`` (or no name)."""
    if name is None or name == OWN_TEMPLATE:
        return None
    _register_study_templates()
    return CHAT_TEMPLATES.get(name, where)
