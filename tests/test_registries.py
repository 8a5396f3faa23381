"""One registry mechanism: lookups with "did you mean" errors, the schema's enums tied to
the registries, and the config checks that run before any job."""

from __future__ import annotations

import copy

import pytest
import yaml

from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.config.schema import validate_config
from reprolm.config_docs import load_schema
from reprolm.errors import ConfigError
from reprolm.registry import DuplicateName, Registry, UnknownName
from workflow_helpers import REPO

SCHEMA_FILE = REPO / "workflow/schemas/config.schema.yaml"
# The workflow's schema with each study's section from its folder.
SCHEMA = load_schema(SCHEMA_FILE)
DEFAULT = overlays.load(REPO / "config/config.yaml", REPO)
PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())
SECTIONS = SCHEMA["properties"]


def test_registry_suggests_the_closest_names_and_refuses_a_second_entry_under_one_name():
    colours = Registry("colour")
    colours.register("red", 1)

    @colours.register("green")
    def green():
        return 2

    assert colours["red"] == 1 and colours.get("green") is green and colours.names() == ["red", "green"]
    assert "red" in colours and "blue" not in colours and len(colours) == 2
    with pytest.raises(UnknownName) as error:
        colours.get("gren", where="paint.colour")
    assert (
        str(error.value) == "paint.colour: unknown colour 'gren'; registered: ['red', 'green']; did you mean 'green'?"
    )
    assert isinstance(error.value, KeyError) and isinstance(error.value, ValueError)
    with pytest.raises(UnknownName, match=r"^unknown colour 'blue'; registered: \['red', 'green'\]$"):
        colours["blue"]
    colours.register("red", 1)  # the same entry again (a module imported twice) is harmless
    with pytest.raises(DuplicateName, match="colour 'red' is registered twice"):
        colours.register("red", 3)


def test_a_lazy_entry_is_named_without_importing_its_module_and_imported_when_looked_up():
    import sys

    sys.modules.pop("colorsys", None)
    colours = Registry("colour conversion")
    colours.register_lazy("to_hsv", "colorsys:rgb_to_hsv")
    colours.register("identity", lambda rgb: rgb)
    assert colours.names() == ["to_hsv", "identity"] and "to_hsv" in colours
    assert "colorsys" not in sys.modules
    assert colours["to_hsv"](1.0, 0.0, 0.0) == (0.0, 1.0, 1.0) and "colorsys" in sys.modules
    colours.register_lazy("to_hsv", "colorsys:rgb_to_hsv")  # a study registered again
    with pytest.raises(DuplicateName, match="colour conversion 'to_hsv' is registered twice"):
        colours.register_lazy("to_hsv", "colorsys:hsv_to_rgb")
    with pytest.raises(ValueError, match="'colorsys.rgb_to_hls' is not a 'module:object' reference"):
        colours.register_lazy("to_hls", "colorsys.rgb_to_hls")
    colours.register_lazy("to_nothing", "colorsys:rgb_to_nothing")
    with pytest.raises(AttributeError):
        colours["to_nothing"]


def _enum(*path) -> list:
    node = SCHEMA
    for key in path:
        node = node[key]
    return node["enum"]


def test_the_schema_takes_the_builders_and_the_rules_stages_from_their_registries():
    """The schema file lists neither; the schema the workflow validates with has each
    registered entry, a study's own (registered from its folder) among them."""
    from reprolm.data.builder_registry import BUILDERS
    from reprolm.stages import RULE_STAGES

    raw = yaml.safe_load(SCHEMA_FILE.read_text())
    builder = ("properties", "datasets", "additionalProperties", "properties", "builder")
    assert "enum" not in raw["properties"]["datasets"]["additionalProperties"]["properties"]["builder"]
    assert _enum(*builder) == BUILDERS.names() and {"ruler_tlg", "feedback_conversations", "chat_sft"} <= set(BUILDERS)
    assert "train_before_test" not in raw["definitions"]["stage_resources"]["properties"]
    stages = SCHEMA["definitions"]["stage_resources"]["properties"]
    assert {RULE_STAGES[rule].resources for rule in RULE_STAGES} - {None} <= set(stages)
    assert RULE_STAGES["train_before_test"].resources == "train_before_test" in stages
    config = copy.deepcopy(DEFAULT)
    config["resources"] = {"train_before_tset": {"gpus": 1}}
    with pytest.raises(ConfigError, match="did you mean 'train_before_test'"):
        validate_config(config, SCHEMA_FILE)


def test_the_schemas_enums_are_the_registries_names():
    from reprolm.generate import BACKENDS
    from reprolm.generate.prompts import MULTI_TURN, PROMPT_BUILDERS
    from reprolm.models.tiny import ARCHITECTURES
    from reprolm.score.judges import JUDGES
    from reprolm.score.metrics import METRICS
    from reprolm.train.examples import FORMATS

    assert _enum("properties", "generation", "properties", "backend") == BACKENDS.names()
    assert sorted(_enum("properties", "recipes", "additionalProperties", "properties", "format")) == sorted(FORMATS)
    assert sorted(_enum("properties", "promptsets", "additionalProperties", "properties", "prompt")) == sorted(
        [*PROMPT_BUILDERS, MULTI_TURN]
    )
    build = SECTIONS["base_models"]["additionalProperties"]["properties"]["build"]["properties"]
    assert tuple(build["architecture"]["enum"]) == ARCHITECTURES
    kinds = [
        branch["properties"]["kind"]["const"]
        for branch in SCHEMA["properties"]["judges"]["additionalProperties"]["oneOf"]
    ]
    assert sorted(kinds) == sorted(JUDGES)
    # Each study's evaluations name metrics that are registered.
    for study in ("ruler", "gem"):
        metrics = SECTIONS[study]["properties"]["evaluations"]["items"]["properties"]["metric"]["enum"]
        assert set(metrics) <= set(METRICS), study


# The studies moved into one folder each so far (issue 35).
FOLDER_STUDIES = ["ruler", "gem", "flr", "harmony", "expo"]


def load_yaml(path):
    return yaml.safe_load(path.read_text())


def test_every_registered_study_of_the_package_has_its_schema_section_and_captions():
    from reprolm.studies import STUDIES

    assert STUDIES.names()[:5] == ["ruler", "harmony", "expo", "flr", "gem"]
    shared = yaml.safe_load(SCHEMA_FILE.read_text())["properties"]
    for name in ["ruler", "harmony", "expo", "flr", "gem"]:
        study = STUDIES[name]
        assert study.captions()["tables"], name
        if name in FOLDER_STUDIES:
            # One folder: its section's schema and its table writer beside its module.
            folder = REPO / "src/reprolm/studies" / name
            assert name not in shared and SECTIONS[name] == study.schema == load_yaml(folder / "schema.yaml"), name
            assert study.table_code()[0].startswith(f"reprolm.studies.{name}."), name
        else:
            assert name in shared and study.schema is None, name
    # The schema names no studies itself: the registry does.
    assert SECTIONS["studies"]["items"] == {"type": "string"}


def test_study_models_and_score_paths_in_the_paper_config():
    from reprolm.studies import STUDIES

    check_config(PAPER, SCHEMA_FILE)
    ruler = STUDIES["ruler"].models(PAPER)
    # Six bases x (ruler, vanilla), then the six instruct baselines used as they are, the
    # seed's ten other open baselines, then the five closed ones.
    assert len(ruler) == 33
    assert ruler[:2] == [("llama3_8b", "ruler"), ("llama3_8b", "vanilla")]
    assert ruler[17] == ("qwen15_7b_chat", "pretrained")
    assert ruler[27:] == [
        ("qwen15_72b_chat", "pretrained"),
        *[(b, "pretrained") for b in ("gpt_4o", "gpt_4_turbo", "gpt_35_turbo", "claude_3_haiku", "claude_35_sonnet")],
    ]
    ruler_scores = STUDIES["ruler"].score_paths(PAPER)
    # tlg, multi_mlt and lm-eval for the 18 open models; self_mlt for the six Ruler finetunes
    # only; tlg with one BOS and with the original's doubled BOS for the ten TLG-only open
    # baselines and again doubled for the six instruct ones; tlg alone for the closed models,
    # asked through their APIs (no weights for lm-eval).
    assert len(ruler_scores) == 18 * 3 + 6 + 10 * 2 + 6 + 5
    assert [path for path in ruler_scores if "/gpt_4o/" in path] == [
        "results/scores/length_levels/gpt_4o/pretrained/tlg.json"
    ]
    assert "results/scores/length_self_mlt/llama3_8b/ruler/self_mlt.json" in ruler_scores
    assert "results/scores/length_self_mlt/llama3_8b/vanilla/self_mlt.json" not in ruler_scores
    harmony = STUDIES["harmony"].score_paths(PAPER)
    assert len(harmony) == 61 * 24 and harmony[0].startswith("results/scores/train_before_test/")
    # FLR's online loop: the starting policy and the two policies aligned from it.
    assert STUDIES["flr"].models(PAPER) == [("llama3_8b_instruct", r) for r in ("pretrained", "flr_dpo", "flr_kto")]
    expo = STUDIES["expo"]
    targets = expo.targets(PAPER)
    searches = [path for path in targets if "/alpha_search/" in path]
    assert searches == [f"results/scores/alpha_search/{b}/pretrained/expo_search.json" for b in PAPER["expo"]["bases"]]
    # Every pair has a model card's alpha, so its evaluations (win rate, grade, the lm-eval
    # suite and the Open LLM Leaderboard v2 suite, of the pair's two ends) are targets at
    # once, not after the search.
    assert len(PAPER["expo"]["card_alphas"]) == len(PAPER["expo"]["bases"])
    assert len(targets) - len(searches) == 4 * 2 * len(PAPER["expo"]["bases"])


def _refused(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        check_config(config, SCHEMA_FILE)
    return str(error.value)


def test_config_checks_catch_what_the_schema_cannot():
    config = copy.deepcopy(DEFAULT)
    check_config(config, SCHEMA_FILE)
    # An inverted length window would make every PM/FM of its target wrong.
    config["length_targets"] = [{"name": "10", "level": 0, "pm": [20, 0], "fm": [0, 20], "bin": [5, 15]}]
    assert _refused(config) == "length_targets[0].pm: window [20, 0] is empty; the lower bound must be below the upper"
    config = copy.deepcopy(DEFAULT)
    config["base_models"]["tiny_llama"]["build"]["num_heads"] = 5
    assert _refused(config) == (
        "base_models.tiny_llama.build: hidden_size 64 is not divisible by num_heads 5; use a num_heads that divides it"
    )
    config = copy.deepcopy(DEFAULT)
    config["base_models"]["tiny_qwen2"]["build"]["num_kv_heads"] = 3
    assert "num_heads 4 is not divisible by num_kv_heads 3" in _refused(config)
    config = copy.deepcopy(DEFAULT)
    config["resources"] = {"default": {"precision": "auto"}}
    assert _refused(config) == (
        "base_models.tiny_llama.resources.finetune.precision: 'auto' cannot train; "
        "choose from ['float32', 'bfloat16', 'float16']"
    )
    config = copy.deepcopy(DEFAULT)
    config["studies"] = []
    assert _refused(config) == (
        "studies: the list is empty; enable at least one of ['ruler', 'harmony', 'expo', 'flr', 'gem']"
    )
    config = copy.deepcopy(DEFAULT)
    config["studies"] = ["rulr"]
    assert _refused(config) == (
        "studies: unknown study 'rulr'; registered: ['ruler', 'harmony', 'expo', 'flr', 'gem']; did you mean 'ruler'?"
    )
    config = copy.deepcopy(DEFAULT)
    config["recipies"] = {}
    assert "top-level config key: 'recipies' is not declared" in _refused(config)
    assert _refused(config).endswith("did you mean 'recipes'?")
    config = copy.deepcopy(DEFAULT)
    config["ruler"]["recipes"] = ["vanila"]
    assert _refused(config).endswith("did you mean 'vanilla'?")
    config = copy.deepcopy(DEFAULT)
    config["sources"]["eli5"]["schema"] = "eli_5"
    assert _refused(config).startswith("sources.eli5.schema: unknown upstream schema 'eli_5'; registered: [")
    assert _refused(config).endswith("did you mean 'eli5'?")
    config = copy.deepcopy(DEFAULT)
    config["sources"]["eli5"]["schema"] = "trl_preference"
    assert _refused(config) == (
        "sources.eli5.fixture: schema 'trl_preference' has no fixture; name a hub dataset for this source"
    )


def _small(study: str) -> dict:
    return overlays.load(REPO / f"tests/configs/config-{study}.yaml", REPO)


def _without_length_targets(study: str) -> dict:
    """A study's small config without length targets, and without the base's SFT data binned
    by them (Ruler's, which ExPO's and FLR's SFT starts train on) and its recipes."""
    config = _small(study)
    del config["length_targets"]
    del config["datasets"]["ruler_train"]
    for recipe in ("vanilla", "sft"):
        del config["recipes"][recipe]
    return config


def test_a_config_without_length_targets_is_refused_only_where_something_reads_them(monkeypatch):
    # GEM and Harmony read no length targets: their configs need none.
    for study in ("gem", "harmony"):
        check_config(_without_length_targets(study), SCHEMA_FILE)
    config = _small("ruler")
    del config["length_targets"]
    assert _refused(config) == "the ruler study needs length_targets ('paper' or a list)"
    # ExPO's vanilla SFT model trains on Ruler's data, binned by the targets.
    config = _small("expo")
    del config["length_targets"]
    assert _refused(config) == (
        "datasets.ruler_train.builder: 'ruler_train' needs length_targets ('paper' or a "
        "list of targets), which the config does not set; set it, or leave out what needs it"
    )
    gem = _without_length_targets("gem")
    for section, name, spec, where in [
        (
            "datasets",
            "tlg",
            {"builder": "ruler_tlg", "sources": ["openhermes"], "params": {"num": 4, "seed": 10}},
            "datasets.tlg.builder: 'ruler_tlg'",
        ),
        (
            "promptsets",
            "sized",
            {**gem["promptsets"]["poems"], "prompt": "target_length"},
            "promptsets.sized.prompt: 'target_length'",
        ),
        ("recipes", "with_mlt", {**gem["recipes"]["ce"], "add_tokens": "mlt"}, "recipes.with_mlt.add_tokens: 'mlt'"),
    ]:
        config = copy.deepcopy(gem)
        config[section][name] = spec
        assert _refused(config).startswith(f"{where} needs length_targets ('paper' or a list of targets)")
    config = copy.deepcopy(gem)
    config["gem"]["evaluations"].append({"promptset": "poems", "metric": "length_levels"})
    # GEM's schema allows no length metric; a study whose schema does (or that has none, as
    # one from study_modules may) reaches the check.
    assert _refused(config).startswith("gem.evaluations.4.metric: 'length_levels' is not one of")
    from reprolm.studies import STUDIES

    monkeypatch.setattr(STUDIES["gem"], "schema", None)
    assert _refused(config).startswith("gem.evaluations[4].metric: 'length_levels' needs length_targets")
    monkeypatch.undo()
    # What reads none passes: a self-chosen length (the model writes its own MLT) and MLT-free recipes.
    config = copy.deepcopy(gem)
    config["promptsets"]["own_length"] = {**gem["promptsets"]["poems"], "prompt": "self_length"}
    config["recipes"]["no_mlt"] = {**gem["recipes"]["ce"], "add_tokens": "none"}
    check_config(config, SCHEMA_FILE)


def test_an_lm_eval_metric_the_task_does_not_report_is_refused_before_any_job(tmp_path):
    from reprolm.checks import preflight

    config = copy.deepcopy(DEFAULT)
    config["lm_eval_suites"]["general"]["tasks"][1]["metric"] = "acc_norm,flexible-extract"
    with pytest.raises(ConfigError) as error:
        preflight(config, str(tmp_path / "tasks.json"))
    assert str(error.value) == (
        "lm_eval_suites.general.tasks[1].metric: lm-eval's task 'hellaswag' does not report "
        "'acc_norm,flexible-extract'; it reports ['acc,none', 'acc_norm,none']"
    )
    config["lm_eval_suites"]["general"]["tasks"][1]["metric"] = "acc_norm,none"
    config["harmony"]["tasks"][2]["metric"] = "acc,none"
    with pytest.raises(
        ConfigError, match=r"harmony.tasks\[2\].metric: lm-eval's task 'cola' does not report 'acc,none'"
    ):
        preflight(config, str(tmp_path / "tasks.json"))
