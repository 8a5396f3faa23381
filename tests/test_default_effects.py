"""The default run shows what it exists to show: every study's effect, with margins
(tests/default_effects.py), and the same checks refuse a real degenerate run's tables."""

from __future__ import annotations

from pathlib import Path

import pytest

import default_effects
from default_config import DEFAULT

DEGENERATE = Path(__file__).parent / "data" / "degenerate_default_run"


@pytest.mark.workflow
def test_ruler_models_stop_near_the_asked_length_and_beat_vanilla_on_every_base(default_run):
    assert default_effects.ruler_problems(default_run, DEFAULT["ruler"]["bases"]) == []


@pytest.mark.workflow
def test_gem_keeps_more_story_diversity_than_ce(default_run):
    assert default_effects.gem_problems(default_run, DEFAULT["gem"]["bases"]) == []


@pytest.mark.workflow
def test_train_before_test_raises_ranking_agreement(default_run):
    assert default_effects.harmony_problems(default_run) == []


@pytest.mark.workflow
def test_every_other_claim_of_the_default_says_why_it_is_not_expected(default_run):
    assert default_effects.unaccounted_claims(default_run) == []
    table = default_effects.directions(default_run, "flr")
    assert table["not expected here"].str.contains("at chance|plumbing").all(), table


def test_the_ruler_check_refuses_a_run_whose_models_never_stopped():
    problems = default_effects.ruler_problems(DEGENERATE, DEFAULT["ruler"]["bases"])
    for base in DEFAULT["ruler"]["bases"]:
        assert any(p.startswith(f"{base}: Ruler meets the asked length") for p in problems), problems
        assert any(p.startswith(f"{base}/ruler: TLG All-level FM 28.33") for p in problems), problems
        # That run's tables did not yet say how many outputs ran to the limit: unknown is refused.
        assert f"{base}/ruler: None% of TLG outputs ran to max_new_tokens (at most 50.0)" in problems
    # Its other effects held; the checks pass what holds.
    assert default_effects.harmony_problems(DEGENERATE) == []
    assert default_effects.gem_problems(DEGENERATE, DEFAULT["gem"]["bases"]) == []
    # Before the config stated its unexpected claims, they stood unexplained.
    unaccounted = default_effects.unaccounted_claims(DEGENERATE)
    assert any("FLR fine-tuned on feedback" in problem for problem in unaccounted), unaccounted
