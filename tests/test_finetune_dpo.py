"""DPO and KTO through the shared finetune stage, on a tiny Llama and fixture preference
pairs: the trained model prefers held-out chosen answers over rejected ones by a wider
margin than the model it started from."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM

from finetune_helpers import tiny_preference_inputs
from reprolm.data.builders import BUILDERS, BuildContext
from reprolm.data.upstream import make_fixture
from reprolm.models.loading import load_tokenizer
from reprolm.train.finetune import FINISHED, FINISHED_MARK, FinetuneSpec, run

RECIPE = {
    "objective": "dpo",
    "beta": 0.1,
    "max_length": 128,
    "learning_rate": 5e-3,
    "num_train_epochs": 2,
    "per_device_train_batch_size": 8,
    "logging_steps": 1,
}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dpo")
    return root, tiny_preference_inputs(root, n=64, seed=3)


def mean_margin(model_dir, pairs: list[dict]) -> float:
    """Mean of log p(chosen) - log p(rejected) over answer tokens, under the chat template."""
    tokenizer = load_tokenizer(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    margins = []
    for pair in pairs:
        prompt = tokenizer.apply_chat_template(pair["prompt"], tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
        scores = []
        for answer in (pair["chosen"], pair["rejected"]):
            answer_ids = tokenizer(answer[0]["content"], add_special_tokens=False).input_ids
            ids = torch.tensor([prompt_ids + answer_ids])
            with torch.no_grad():
                logprobs = model(ids).logits.log_softmax(-1)[0, len(prompt_ids) - 1 : -1]
            scores.append(logprobs.gather(1, torch.tensor(answer_ids)[:, None]).sum().item())
        margins.append(scores[0] - scores[1])
    return sum(margins) / len(margins)


@pytest.fixture(scope="module")
def base_margin(pairs) -> float:
    """The starting model's mean margin on the held-out pairs (both objectives start from it)."""
    root, built = pairs
    return mean_margin(root / "base", built["test"])


def test_preference_pairs_are_conversational_and_split(pairs):
    _, built = pairs
    assert set(built) == {"train", "test"} and len(built["train"]) == 64
    pair = built["train"][0]
    assert [turn["role"] for turn in pair["prompt"]] == ["user"]
    assert pair["chosen"][0]["role"] == pair["rejected"][0]["role"] == "assistant"


# KTO sees each answer alone against a batch-level KL baseline: a slower signal than DPO's.
@pytest.mark.parametrize(
    "objective, settings, widening",
    [
        ("dpo", {}, 5.0),
        ("kto", {"learning_rate": 1e-3, "num_train_epochs": 4}, 1.5),
    ],
)
@pytest.mark.slow
def test_preference_training_widens_the_margin_on_held_out_pairs(pairs, base_margin, objective, settings, widening):
    root, built = pairs
    spec = FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(root / objective),
        checkpoint_root=str(root / "checkpoints"),
        train_file=str(root / "train.parquet"),
        recipe={**RECIPE, "objective": objective, **settings},
        seed=0,
    )
    run(spec)
    before, after = base_margin, mean_margin(root / objective, built["test"])
    assert after > before + widening, (before, after)
    assert sorted(p.name for p in spec.checkpoint_dir.iterdir()) == [FINISHED, FINISHED_MARK]


def test_dpo_on_rows_without_pairs_names_the_file_row_and_field(pairs, tmp_path):
    root, built = pairs
    bad = [dict(built["train"][0]), {**built["train"][1], "rejected": []}]
    pq.write_table(pa.Table.from_pylist(bad), tmp_path / "bad.parquet")
    spec = FinetuneSpec(
        base_model=str(root / "base"),
        output_dir=str(tmp_path / "out"),
        checkpoint_root=str(tmp_path / "checkpoints"),
        train_file=str(tmp_path / "bad.parquet"),
        recipe=RECIPE,
    )
    with pytest.raises(KeyError, match="bad.parquet: row 1: missing or empty field 'rejected'"):
        run(spec)
    assert not (tmp_path / "out").exists()


def test_preference_pairs_need_exactly_one_source(pairs):
    root, _ = pairs
    sources = {"a": root / "raw", "b": root / "raw"}
    with pytest.raises(ValueError, match="exactly one source; configured: \\['a', 'b'\\]"):
        BUILDERS["preference_pairs"](BuildContext(sources, dict.fromkeys(sources, "ultrafeedback_binarized"), {}))


def test_preference_schema_names_the_bad_field():
    from reprolm.data.schemas import DataError
    from reprolm.data.upstream import validate_records

    record = make_fixture("ultrafeedback_binarized", n=1, seed=0)["train_prefs"][0]
    broken = {**record, "chosen": record["chosen"][:1]}
    with pytest.raises(DataError, match="row 0: field 'chosen\\[-1\\].role'"):
        validate_records([broken], "ultrafeedback_binarized", "prefs.parquet")
