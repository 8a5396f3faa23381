"""The stage table (reprolm.stages) against the workflow's rules, read from the rule files
(``snakemake --list-rules`` takes seconds to parse the workflow)."""

from __future__ import annotations

import re
from pathlib import Path

from reprolm.provenance.cost import job_cost
from reprolm.rehearse.submissions import resource_sources
from reprolm.stages import RULE_STAGES, RuleStage, inference_stages, rule_stage
from reprolm.studies import STUDIES  # registering the studies registers their rules' stages

REPO = Path(__file__).resolve().parents[1]
# `rule NAME:` / `checkpoint NAME:`, and a rule named in its body (`name:` on the next line)
# where one loop defines a step's local and API rules.
DECLARED = re.compile(r"^\s*(?:rule|checkpoint)\s+(\w+)\s*:", re.MULTILINE)
NAMED = re.compile(r"^\s*name:\s*\n\s*(.+)$", re.MULTILINE)
STEP_PAIR = re.compile(r"judge_rule\(\"(\w+)\", api\)")
# The workflow's target rule runs nothing.
TARGET = "all"


def rules_in(files) -> set[str]:
    """The rule names the rule files declare."""
    rules: set[str] = set()
    for path in files:
        text = path.read_text()
        rules |= set(DECLARED.findall(text))
        for expression in NAMED.findall(text):
            pair = STEP_PAIR.fullmatch(expression.strip())
            names = {pair[1], f"{pair[1]}_api"} if pair else set(re.findall(r"\"(\w+)\"", expression))
            assert names, f"{path.name}: cannot read the rule name {expression.strip()!r}"
            rules |= names
    return rules - {TARGET}


def workflow_rules() -> set[str]:
    files = [REPO / "workflow" / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")]
    return rules_in(files + list((REPO / "src" / "reprolm" / "studies").rglob("*.smk")))


def test_every_rule_has_a_stage_and_every_stage_entry_a_rule():
    rules = workflow_rules()
    # Rules of each kind the reader must see: plain, checkpoint, a loop's pair and a judge pair.
    assert {"finetune", "alpha_search", "generate", "generate_api", "grade", "grade_api"} <= rules
    assert not rules - set(RULE_STAGES), f"rules without a stage in reprolm.stages: {sorted(rules - set(RULE_STAGES))}"
    assert not set(RULE_STAGES) - rules, f"stages of rules the workflow lacks: {sorted(set(RULE_STAGES) - rules)}"


def test_a_study_stages_the_rules_of_its_own_folder():
    """Each package study's rules file declares exactly the rules its entry stages."""
    for name in STUDIES.names():
        rules_file = STUDIES[name].rules_file()
        declared = rules_in([Path(rules_file)]) if rules_file else set()
        assert set(STUDIES[name].rule_stages) == declared, name
    assert rule_stage("model_ranking_api") == RuleStage("judge", api=True)
    assert rule_stage("train_before_test").inference and "train_before_test" in inference_stages()


def test_cost_and_rehearsal_read_the_table():
    assert job_cost({"rule": "judge_released_api"}).stage == "judge"
    assert job_cost({"rule": "table_pages"}).stage == "report"
    # A rule a record names that the workflow no longer has is a stage of its own.
    assert job_cost({"rule": "reward_benchmark"}).stage == "reward_benchmark"
    assert rule_stage("reward_benchmark").resources is None
    config = {"judges": {}}
    assert resource_sources(config, "adapter_base_model", {"base": "mine"}) == {("extrapolate", "mine")}
    assert resource_sources(config, "lm_eval", {"base": "tiny", "suite": "s"}) == {("evaluate", "tiny")}
    assert resource_sources(config, "generate_api", {"base": "gpt"}) == frozenset()
    assert resource_sources(config, "dataset", {"dataset": "d", "split": "train"}) == frozenset()
