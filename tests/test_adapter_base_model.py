"""A LoRA adapter folder as a base model (``base_models.*.path``): its base found from the
config (or named by ``adapter_base``), merged into it as a plain checkpoint that every stage
loads, hashed by content; an adapter whose base is not available is refused naming its
``base_model_name_or_path`` and the key to set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from finetune_helpers import tiny_finetune_inputs
from reprolm.errors import ConfigError
from reprolm.models.local import ADAPTER_CONFIG, AdapterBase, adapter_base, adapter_hashes, merge_adapter_base
from reprolm.provenance.hashing import content_hash
from workflow_helpers import dry_run_details, scratch_copy

TARGETS = ["q_proj", "v_proj"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A tiny base checkpoint (``base``) and a LoRA adapter of it saved by peft, its B
    matrices random so that merging changes the weights (``adapter``), recorded against the
    base's path relative to the folder they sit in."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("adapter_base")
    tiny_finetune_inputs(root)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(root / "base")
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    model.peft_config["default"].base_model_name_or_path = "base"
    model.save_pretrained(root / "adapter")
    return root


@pytest.fixture
def in_made(made, monkeypatch):
    monkeypatch.chdir(made)
    return made


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


def test_an_adapter_is_merged_into_its_base_as_a_plain_checkpoint_in_the_base_dtype(in_made, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged = tmp_path / "merged"
    record = merge_adapter_base("adapter", "base", merged)
    assert not (merged / ADAPTER_CONFIG).exists() and (merged / "model.safetensors").is_file()
    # No tokenizer in the adapter: the base's, file for file.
    assert record["tokenizer_from"] == "base" and record["dtype"] == "float32"
    assert (merged / "tokenizer.json").read_bytes() == Path("base/tokenizer.json").read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(merged)
    ids = tokenizer("the river", add_special_tokens=False).input_ids
    plain = AutoModelForCausalLM.from_pretrained(merged)
    base = AutoModelForCausalLM.from_pretrained("base")
    with_adapter = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("base"), "adapter")
    assert torch.allclose(logits(plain, ids), logits(with_adapter, ids), atol=1e-5)
    assert not torch.allclose(logits(plain, ids), logits(base, ids), atol=1e-3)
    # The same merge gives the same bytes (the content hash downstream caches key on).
    merge_adapter_base("adapter", "base", tmp_path / "again")
    assert content_hash(tmp_path / "again") == content_hash(merged)


def test_a_bfloat16_base_gets_bfloat16_merged_weights_and_the_adapters_own_tokenizer(in_made, tmp_path):
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained("base").to(torch.bfloat16).save_pretrained(tmp_path / "base16")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(Path("base") / name, tmp_path / "base16" / name)
    shutil.copytree("adapter", tmp_path / "adapter")
    (tmp_path / "adapter/tokenizer_config.json").write_text(Path("base/tokenizer_config.json").read_text())
    (tmp_path / "adapter/tokenizer.json").write_text(Path("base/tokenizer.json").read_text())
    record = merge_adapter_base(tmp_path / "adapter", tmp_path / "base16", tmp_path / "merged")
    assert record["dtype"] == "bfloat16" and record["tokenizer_from"] == str(tmp_path / "adapter")
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "merged").dtype == torch.bfloat16


def recorded_as(folder: str, base: str) -> None:
    config = json.loads((Path(folder) / ADAPTER_CONFIG).read_text())
    (Path(folder) / ADAPTER_CONFIG).write_text(json.dumps({**config, "base_model_name_or_path": base}))


def test_the_adapters_base_is_found_among_configured_base_models_or_as_a_folder(in_made, tmp_path):
    shutil.copytree("adapter", tmp_path / "adapter")
    adapter = str(tmp_path / "adapter")
    mine = {"path": adapter}
    # Recorded as a local path that a configured base model has.
    recorded_as(adapter, "base")
    assert adapter_base({"tiny": {"path": "base"}, "mine": mine}, "mine") == AdapterBase(
        "resources/models/tiny", "tiny"
    )
    # ... or only as a checkpoint folder: loaded from there, hashed by content.
    assert adapter_base({"mine": mine}, "mine") == AdapterBase("base")
    hashes = adapter_hashes({"mine": mine}, "mine")
    assert hashes == {"adapter": content_hash(adapter), "base_folder": content_hash("base")}
    assert adapter_hashes({"tiny": {"path": "base"}, "mine": mine}, "mine")["base_folder"] is None
    # A recipe saved as an adapter records its start model's folder under resources/models.
    recorded_as(adapter, "resources/models/tiny_llama")
    bases = {"tiny_llama": {"build": {}}, "mine": mine}
    assert adapter_base(bases, "mine") == AdapterBase("resources/models/tiny_llama", "tiny_llama")
    # A hub id, as the hub base model that downloads it.
    recorded_as(adapter, "meta-llama/Meta-Llama-3-8B")
    bases = {"llama3_8b": {"hub": {"path": "meta-llama/Meta-Llama-3-8B"}}, "mine": mine}
    assert adapter_base(bases, "mine").name == "llama3_8b"
    # adapter_base names the base where the record does not.
    assert adapter_base({"tiny": {"path": "base"}, "mine": {**mine, "adapter_base": "tiny"}}, "mine").name == "tiny"
    assert adapter_base({"mine": {**mine, "adapter_base": "base"}}, "mine") == AdapterBase("base")


def test_an_adapter_whose_base_is_not_available_is_refused_naming_it_and_the_key(in_made, tmp_path):
    from reprolm.checks import _check_base_models

    shutil.copytree("adapter", tmp_path / "adapter")
    adapter = str(tmp_path / "adapter")
    recorded_as(adapter, "meta-llama/Meta-Llama-3-8B")
    config = {"base_models": {"mine": {"path": adapter}}}
    with pytest.raises(
        ConfigError,
        match=r"base_models\.mine\.path: .* is a LoRA adapter of 'meta-llama/Meta-Llama-3-8B' \(adapter_config\.json's "
        r"base_model_name_or_path\).* set base_models\.mine\.adapter_base",
    ):
        _check_base_models(config)
    config["base_models"]["mine"]["adapter_base"] = "llama"
    with pytest.raises(ConfigError, match=r"base_models\.mine\.adapter_base: 'llama' is neither a configured base"):
        _check_base_models(config)
    (tmp_path / "adapter/adapter_model.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"base_models\.mine\.path: .*without its weights"):
        _check_base_models({"base_models": {"mine": {"path": adapter}}})
    with pytest.raises(ConfigError, match=r"base_models\.tiny\.path: base: not a LoRA adapter folder"):
        _check_base_models({"base_models": {"tiny": {"path": "base", "adapter_base": "x"}}})


def test_an_adapter_judge_is_merged_onto_its_base(in_made, tmp_path):
    """An FLR judge saved as an adapter (peft.save: adapter) scores as its merged model."""
    from reprolm.score.flr import FollowUpScorer

    followups = {"relevance": {"positive": ["You got it right."], "negative": ["That is wrong."]}}
    conversation = [[{"role": "user", "content": "the river"}, {"role": "assistant", "content": "the miller"}]]
    # As a finetune saves it: the adapter with its tokenizer.
    shutil.copytree("adapter", tmp_path / "judge")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(Path("base") / name, tmp_path / "judge" / name)
    merge_adapter_base(tmp_path / "judge", "base", tmp_path / "merged")
    from_adapter = FollowUpScorer(str(tmp_path / "judge"), followups).score(conversation)
    assert from_adapter == pytest.approx(FollowUpScorer(str(tmp_path / "merged"), followups).score(conversation))
    assert from_adapter != pytest.approx(FollowUpScorer("base", followups).score(conversation))


@pytest.mark.workflow
def test_an_adapter_base_model_is_merged_by_its_rule_after_its_configured_base(made, tmp_path):
    """Dry run: the adapter's configured base is registered first, and the merge job gets it
    as input and the adapter's hash as a param."""
    work = scratch_copy(tmp_path / "work")
    shutil.copytree(made / "base", work / "my_base")
    shutil.copytree(made / "adapter", work / "my_adapter")
    recorded_as(work / "my_adapter", "my_base")
    bases = {"mine": {"path": "my_base"}, "mine_lora": {"path": "my_adapter"}}
    (work / "mine.yaml").write_text(yaml.safe_dump({"base_models": bases}))
    jobs = dry_run_details(work, "resources/models/mine_lora", "--configfile", "config/config.yaml", "mine.yaml")
    assert [(job.rule, job.wildcards) for job in jobs] == [
        ("local_base_model", {"base": "mine"}),
        ("adapter_base_model", {"base": "mine_lora"}),
    ]
    assert jobs[1].inputs == ["resources/models/mine"] and jobs[1].outputs == ["resources/models/mine_lora"]


def test_lm_eval_applies_an_adapter_folder_to_its_base(in_made, tmp_path):
    """lm-eval's hf model given a recipe saved as an adapter (with its tokenizer) scores as
    the merged checkpoint."""
    from reprolm.score.lm_eval_bridge import language_model

    shutil.copytree("adapter", tmp_path / "adapter")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(Path("base") / name, tmp_path / "adapter" / name)
    recorded_as(tmp_path / "adapter", str(in_made / "base"))
    merge_adapter_base(tmp_path / "adapter", "base", tmp_path / "merged")
    ids = [5, 6, 7, 8]
    adapted = language_model(str(tmp_path / "adapter"), dtype="float32", batch_size=1).model
    merged = language_model(str(tmp_path / "merged"), dtype="float32", batch_size=1).model
    assert torch.allclose(logits(adapted, ids), logits(merged, ids), atol=1e-5)
