"""Each study's table writer, by study name."""

from __future__ import annotations

from reprolm.aggregate.expo import write_expo_tables
from reprolm.aggregate.flr_tables import write_flr_tables
from reprolm.aggregate.gem_tables import write_gem_tables
from reprolm.aggregate.harmony_tables import write_harmony_tables
from reprolm.aggregate.length_tables import write_ruler_tables
from reprolm.aggregate.tables import load_scores
from reprolm.provenance import atomic_path

STUDY_TABLES = {"ruler": write_ruler_tables, "harmony": write_harmony_tables, "expo": write_expo_tables,
                "flr": write_flr_tables, "gem": write_gem_tables}


def write_study_tables(study: str, score_paths, study_config, config, tables: str, plots: str) -> None:
    scores = load_scores(score_paths)
    with atomic_path(tables) as tables_tmp, atomic_path(plots) as plots_tmp:
        tables_tmp.mkdir()
        plots_tmp.mkdir()
        STUDY_TABLES[study](scores, study_config, config, tables_tmp, plots_tmp)
