rule study_tables:
    input:
        study_table_inputs,
    output:
        tables=report(
            directory("results/tables/{study}"),
            patterns=["{name}.csv"],
            caption="../report/tables.rst",
            category="{study}",
            subcategory="tables",
        ),
        plots=report(
            directory("results/plots/{study}"),
            patterns=["{name}.png"],
            caption="../report/plots.rst",
            category="{study}",
            subcategory="plots",
        ),
    log:
        "logs/study_tables/{study}.log",
    conda:
        "../envs/core.yaml"
    params:
        models=lambda wildcards: lookups.canonical(
            lookups.study_models(config, wildcards.study)
        ),
        study=lambda wildcards: lookups.canonical(config[wildcards.study]),
        config=lambda wildcards: lookups.canonical(
            lookups.study_settings(config, wildcards.study)
        ),
    script:
        "../scripts/study_tables.py"
