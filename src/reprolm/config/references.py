"""Checks that a name one config section uses is declared in another, as a study's own
checks and :mod:`reprolm.checks` ask them: a model, a recipe, a judge that grades."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.lookups import expo_reference, expo_reference_dir, extrapolation
from reprolm.errors import ConfigError, require
from reprolm.paths import PRETRAINED, split_expo
from reprolm.score.judges import judge_kind


def require_recipe(config: Mapping, recipe: str, allowed: list, where: str) -> None:
    """A declared recipe, or ``{recipe}+expo{alpha}`` of one that has an ExPO reference
    (``pretrained+expo{alpha}``'s reference depends on the base; it is checked per model)."""
    plain, alpha = split_expo(recipe)
    require(plain, allowed, where)
    if alpha is not None and plain != PRETRAINED:
        expo_reference(config, plain)


def check_extrapolation(config: Mapping) -> None:
    """The ``extrapolation`` section names declared recipes and base models. The extrapolate
    stage is shared: any study's model may be extrapolated, so this holds whichever studies
    are enabled."""
    section, recipes = extrapolation(config), config.get("recipes", {})
    for aligned, reference in section.get("references", {}).items():
        require(aligned, recipes, "extrapolation.references")
        require(reference, list(recipes) + [PRETRAINED], f"extrapolation.references.{aligned}")
    for index, name in enumerate(section.get("models", [])):
        base, recipe = name.split("/", 1)
        require(base, config["base_models"], f"extrapolation.models[{index}]")
        if split_expo(recipe)[0] == PRETRAINED:
            expo_reference_dir(config, base, PRETRAINED)
        else:
            require_recipe(config, recipe, list(recipes), f"extrapolation.models[{index}]")
    for aligned, reference in section.get("base_references", {}).items():
        require(aligned, config["base_models"], "extrapolation.base_references")
        require(reference, config["base_models"], f"extrapolation.base_references.{aligned}")


def require_model(config: Mapping, name: str, where: str) -> None:
    """``name`` is ``{base}/{recipe}`` of a declared base model and recipe (or pretrained)."""
    base, _, recipe = name.partition("/")
    require(base, config["base_models"], where)
    require_recipe(config, recipe, list(config.get("recipes", {})) + [PRETRAINED], where)


def require_grader(name, judges: Mapping, where: str) -> None:
    """``name`` is a declared judge that grades single answers."""
    require(name, judges, where)
    kind = judge_kind(judges[name])
    if kind.pairwise_only:
        graders = sorted(n for n, spec in judges.items() if not judge_kind(spec).pairwise_only)
        raise ConfigError(
            f"{where}: judge {name!r} ({kind.name}) only compares two answers, and this key grades "
            f"single answers; judges that grade: {graders}"
        )


def check_sampled_evaluations(config: Mapping, evaluations: list, where: str) -> None:
    """Metrics over many samples per prompt need that many: maj@k / pass@k at the largest k
    of ``metrics.answer_voting.ks``, diversity at least two."""
    ks = config.get("metrics", {}).get("answer_voting", {}).get("ks")
    for index, evaluation in enumerate(evaluations):
        samples = config["promptsets"][evaluation["promptset"]]["sampling"].get("n", 1)
        if evaluation["metric"] == "answer_voting" and ks and max(ks) > samples:
            raise ConfigError(
                f"{where}[{index}]: metrics.answer_voting.ks asks for @{max(ks)}, but promptset "
                f"{evaluation['promptset']!r} samples n={samples} answers per prompt"
            )
        if evaluation["metric"] == "diversity" and samples < 2:
            raise ConfigError(
                f"{where}[{index}]: diversity compares a prompt's samples, but promptset "
                f"{evaluation['promptset']!r} samples n={samples}; set sampling.n to 2 or more"
            )
