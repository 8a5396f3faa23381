"""FLR's dataset builder, registered in :data:`reprolm.data.builder_registry.BUILDERS` by the study
(``Flr.builders``): the fine-tuned variant's feedback conversations."""

from __future__ import annotations

from reprolm.data.builders import BuildContext
from reprolm.score.flr import FEEDBACK_OPENING


def build_feedback_conversations(ctx: BuildContext) -> dict[str, list[dict]]:
    """Training data for FLR's fine-tuned variant: natural-language feedback in the
    role-swapped format. The user opens with FLR's request, the assistant asks the question,
    the user answers and the assistant gives the feedback (``messages``; split ``train``)."""
    if len(ctx.sources) != 1:
        raise ValueError(f"feedback_conversations builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    records = ctx.records(source, ctx.params.get("split"))[: ctx.params.get("num")]
    return {
        "train": [
            {
                "id": index,
                "messages": [
                    {"role": "user", "content": FEEDBACK_OPENING},
                    {"role": "assistant", "content": r["orig_instruction"]},
                    {"role": "user", "content": r["orig_response"]},
                    {"role": "assistant", "content": r["orig_feedback"].split("[RESULT]")[0].strip()},
                ],
            }
            for index, r in enumerate(records)
        ]
    }
