"""Named chat templates a recipe can train with instead of the base model's own.

A recipe's ``chat_template`` names one: the finetune sets it on the tokenizer, adds its
special tokens (growing the embeddings) and saves both with the model, so generation and
every later finetune of that model use the same template. ``own`` keeps the base's template
(the project's generic one for a base without any). Studies register the templates their
original code trains with.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprolm.registry import Registry

# A recipe's ``chat_template`` that keeps the base model's own template.
OWN_TEMPLATE = "own"


@dataclass(frozen=True)
class ChatTemplate:
    jinja: str
    # Tokens the template writes that must each be one special token.
    special_tokens: tuple[str, ...] = ()


CHAT_TEMPLATES: Registry[ChatTemplate] = Registry("chat template")


def template_names() -> list[str]:
    """What a recipe's ``chat_template`` may name (the package's studies registered)."""
    import reprolm.studies  # noqa: F401  (each study registers its templates on import)

    return [OWN_TEMPLATE, *CHAT_TEMPLATES.names()]


def named_template(name: str | None, where: str | None = None) -> ChatTemplate | None:
    """The template ``name`` stands for; None for ``own`` (or no name)."""
    if name is None or name == OWN_TEMPLATE:
        return None
    import reprolm.studies  # noqa: F401

    return CHAT_TEMPLATES.get(name, where)
