"""Studies as plug-ins: each folder here registers one :class:`Study` in :data:`STUDIES`; a
researcher's own study is a file named in the config's ``study_modules``."""

from reprolm.studies.base import (
    STUDIES,
    Study,
    enabled_studies,
    job_flops,
    leaderboard_grades,
    leaderboard_models,
    load_study_modules,
    register_study,
    section_schema,
    study,
    study_rules,
    with_study_sections,
)

# Registering the package's own studies (each module registers itself on import).
from reprolm.studies import ruler, harmony, expo, flr, gem  # noqa: E402,F401  isort: skip

__all__ = [
    "STUDIES",
    "Study",
    "enabled_studies",
    "job_flops",
    "leaderboard_grades",
    "leaderboard_models",
    "load_study_modules",
    "register_study",
    "section_schema",
    "study",
    "study_rules",
    "with_study_sections",
]
