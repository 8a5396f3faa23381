"""Recipes reach every TRL and peft option: ``peft`` trains LoRA for each objective (saved
merged, or as an adapter that loading merges onto its base) and ``trainer_args`` reaches the
objective's TRL/transformers settings class, checked before any job; a tiny model's learning
rate on a 7B model is warned about."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

from finetune_helpers import tiny_preference_inputs
from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.config.schema import validate_config
from reprolm.errors import ConfigError
from reprolm.models.loading import ADAPTER_CONFIG, load_causal_lm, load_tokenizer
from reprolm.train.finetune import TRAINING_ARGS, FinetuneSpec, run

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
TARGETS = ("q_proj", "v_proj")
IPO_LORA = {
    "objective": "dpo",
    "beta": 0.1,
    "max_length": 128,
    "learning_rate": 5e-3,
    "num_train_epochs": 1,
    "max_steps": 3,
    "per_device_train_batch_size": 4,
    "logging_steps": 1,
    "peft": {"r": 4, "lora_alpha": 8, "target_modules": list(TARGETS), "save": "adapter"},
    "trainer_args": {"loss_type": "ipo"},
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny base model, preference pairs (train.parquet) and their prompts with the chosen
    answers as SFT rows (sft.parquet)."""
    root = tmp_path_factory.mktemp("recipe_options")
    pairs = tiny_preference_inputs(root, n=16, seed=3)["train"]
    rows = [{"Instruction": pair["prompt"][0]["content"], "output": pair["chosen"][0]["content"]} for pair in pairs]
    pq.write_table(pa.Table.from_pylist(rows), root / "sft.parquet")
    return root


def finetune(root: Path, name: str, recipe: dict, train_file: str = "train.parquet") -> Path:
    run(
        FinetuneSpec(
            base_model=str(root / "base"),
            output_dir=str(root / name),
            checkpoint_root=str(root / "checkpoints" / name),
            train_file=str(root / train_file),
            recipe=recipe,
        )
    )
    return root / name


def changed_weights(model, base) -> dict[str, bool]:
    """Each of the base's weights: whether ``model`` holds another value for it."""
    trained = model.state_dict()
    return {name: not torch.equal(trained[name], weight) for name, weight in base.state_dict().items()}


@pytest.fixture(scope="module")
def ipo_adapter(inputs, request):
    """The IPO LoRA adapter and the losses TRL logged while training it."""
    from trl import DPOTrainer

    logged = []
    original = DPOTrainer.log
    patch = pytest.MonkeyPatch()
    patch.setattr(DPOTrainer, "log", lambda self, logs, *a, **k: (logged.append(logs), original(self, logs, *a, **k)))
    request.addfinalizer(patch.undo)
    adapter = finetune(inputs, "ipo_adapter", IPO_LORA)
    patch.undo()
    return adapter, [entry["loss"] for entry in logged if "loss" in entry]


def test_dpo_with_peft_and_loss_type_ipo_trains_an_ipo_lora_adapter(inputs, ipo_adapter):
    adapter, losses = ipo_adapter
    assert (adapter / ADAPTER_CONFIG).is_file() and not (adapter / "model.safetensors").exists()
    settings = torch.load(adapter / TRAINING_ARGS, weights_only=False)
    assert type(settings).__name__ == "DPOConfig" and settings.loss_type == ["ipo"] and settings.beta == 0.1
    # IPO's loss is (margin - 1/(2 beta))^2: 25 at the first step, where the adapter is still
    # zero and the policy is its reference (DPO's sigmoid loss would start at log 2).
    assert len(losses) == 3 and losses[0] == pytest.approx(25.0, abs=1e-3)
    base = AutoModelForCausalLM.from_pretrained(inputs / "base")
    changed = changed_weights(load_causal_lm(str(adapter)), base)
    targeted = {name for name in changed if name.endswith(tuple(f"{t}.weight" for t in TARGETS))}
    assert len(targeted) == 4 and {name for name, differs in changed.items() if differs} == targeted


@pytest.mark.slow
def test_an_adapter_generates_and_a_merged_model_is_a_plain_checkpoint_of_the_same_weights(inputs, ipo_adapter):
    adapter, _ = ipo_adapter
    tokenizer = load_tokenizer(str(adapter))
    model = load_causal_lm(str(adapter))
    prompt = tokenizer("the river", return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=5, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert generated.shape[1] == prompt.input_ids.shape[1] + 5

    merged = finetune(inputs, "ipo_merged", {**IPO_LORA, "peft": {**IPO_LORA["peft"], "save": "merged"}})
    assert not (merged / ADAPTER_CONFIG).exists()
    assert torch.load(merged / TRAINING_ARGS, weights_only=False).loss_type == ["ipo"]
    plain = AutoModelForCausalLM.from_pretrained(merged)
    assert not any(changed_weights(plain, model).values())


@pytest.mark.parametrize("objective", ["sft", "reward"])
def test_peft_trains_lora_for_sft_and_reward_models(inputs, objective):
    """SFT wraps the model in peft itself; TRL's RewardTrainer gets the config and trains the
    new score head in full beside the adapters."""
    recipe = {
        "objective": objective,
        "max_length": 128,
        "learning_rate": 5e-3,
        "num_train_epochs": 1,
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "peft": {"r": 4, "target_modules": list(TARGETS)},
    }
    if objective == "sft":
        recipe["format"] = "instruction_response"
    merged = finetune(inputs, f"{objective}_lora", recipe, "sft.parquet" if objective == "sft" else "train.parquet")
    model_class = AutoModelForCausalLM if objective == "sft" else AutoModelForSequenceClassification
    base = model_class.from_pretrained(inputs / "base", **({} if objective == "sft" else {"num_labels": 1}))
    trained = model_class.from_pretrained(merged)
    differing = {name for name, differs in changed_weights(trained, base).items() if differs}
    lora = {name for name in differing if name.endswith(("q_proj.weight", "v_proj.weight"))}
    assert len(lora) == 4
    assert differing - lora == (set() if objective == "sft" else {"score.weight"})


@pytest.fixture
def config():
    config = overlays.load(REPO / "config/config.yaml", REPO)
    config["recipes"]["dpo"]["peft"] = {"r": 8, "lora_alpha": 16, "save": "adapter"}
    config["recipes"]["dpo"]["trainer_args"] = {"loss_type": "ipo"}
    return config


def test_schema_and_checks_accept_peft_and_trainer_args(config):
    validate_config(config, SCHEMA)
    check_config(config, SCHEMA)


@pytest.mark.parametrize(
    "section, settings, message",
    [
        (
            "trainer_args",
            {"loss_typ": "ipo"},
            "recipes.dpo.trainer_args: 'loss_typ' is not a setting of trl.DPOConfig; did you mean 'loss_type'?",
        ),
        (
            "trainer_args",
            {"output_dir": "elsewhere"},
            "recipes.dpo.trainer_args.output_dir: the project sets it (checkpoints go to results/checkpoints/",
        ),
        (
            "trainer_args",
            {"learning_rate": 1e-5},
            "recipes.dpo.trainer_args.learning_rate: a recipe key; set it as recipes.dpo.learning_rate",
        ),
        (
            "peft",
            {"lora_alpa": 16},
            "recipes.dpo.peft: 'lora_alpa' is not a setting of peft.LoraConfig; did you mean 'lora_alpha'?",
        ),
        ("peft", {"task_type": "SEQ_CLS"}, "recipes.dpo.peft.task_type: the project sets it (the recipe's objective"),
        (
            "peft",
            {"quantization": "4bit"},
            "recipes.dpo.peft.quantization: QLoRA's 4-bit weights need a GPU (bitsandbytes' kernels are CUDA's), "
            "and tiny_llama's finetune runs on the CPU (resources.finetune.gpus is 0)",
        ),
    ],
)
def test_a_misspelt_or_project_owned_option_is_refused_naming_it(config, section, settings, message):
    config["recipes"]["dpo"][section] = settings
    with pytest.raises(ConfigError) as refused:
        check_config(config, SCHEMA)
    assert message in str(refused.value)


def test_a_tiny_models_learning_rate_on_a_7b_model_is_warned_about(config, caplog):
    config["base_models"]["llama2_7b"] = {"hub": {"path": "meta-llama/Llama-2-7b-hf"}}
    config["expo"]["bases"].append("llama2_7b")
    # ExPO's recipes on it: dpo (LoRA below) and its SFT start, at the tiny models' rate.
    assert config["recipes"]["sft"]["learning_rate"] == 3e-3
    with caplog.at_level(logging.WARNING, logger="reprolm.checks"):
        check_config(config, SCHEMA)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert (
        "recipes.sft.learning_rate: 0.003 for a full sft finetune of llama2_7b (7.0B parameters, from its "
        "name) is a tiny model's rate" in "\n".join(warnings)
    )
    # LoRA (the dpo recipe here) and the tiny models themselves are not warned about.
    assert not [w for w in warnings if "recipes.dpo." in w or "tiny_" in w]
