rule study_tables:
    input:
        unpack(study_table_inputs),
    output:
        # The report shows these as rendered pages (rule table_pages), each with its CSV.
        tables=directory("results/tables/{study}"),
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
        code=study_tables_code,
        models=lambda wildcards: canonical(
            study(config, wildcards.study).models(config)
        ),
        study=lambda wildcards: canonical(config[wildcards.study]),
        config=lambda wildcards: canonical(
            study(config, wildcards.study).settings(config)
        ),
        study_modules=config.get("study_modules", []),
        captions=lambda wildcards: study(config, wildcards.study).captions(),
    script:
        "../scripts/study_tables.py"


rule table_pages:
    input:
        unpack(table_pages_inputs),
    output:
        pages=report(
            directory("results/report/tables/{study}"),
            patterns=["{name}.html"],
            caption="../report/table.rst",
            category="{study}",
            subcategory="tables",
            labels={"table": "{name}"},
        ),
    log:
        "logs/table_pages/{study}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_pages.py"),
        captions=lambda wildcards: table_captions(wildcards.study),
        judges=lambda wildcards: table_judges(wildcards.study),
        # API models' generations, whose records say which model the API served.
        endpoint_generations={
            base: f"results/generations/{base}"
            for base in sorted(lookups.endpoint_models(config))
        },
    script:
        "../scripts/table_pages.py"


rule judge_agreement_page:
    input:
        "results/tables/judge_agreement/{study}.csv",
    output:
        report(
            "results/report/judge_agreement/{study}.html",
            caption="../report/judge_agreement.rst",
            category="{study}",
            subcategory="tables",
            labels={"table": "judge_agreement"},
        ),
    log:
        "logs/judge_agreement_page/{study}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_page.py"),
        titles=lambda wildcards: [f"{wildcards.study}: judge_agreement"],
    script:
        "../scripts/table_page.py"


rule headline_summary:
    input:
        headlines="results/report/paper_headlines.csv",
        directions="results/report/effect_directions.csv",
    output:
        "results/report/headlines.html",
    log:
        "logs/headline_summary.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("headline_summary.py"),
    script:
        "../scripts/headline_summary.py"


rule paper_comparison:
    input:
        tables=[paths.tables_dir(s.name) for s in STUDIES],
        headlines="config/paper_headlines.yaml",
    output:
        # The report shows these as pages (rule paper_comparison_pages), each with its CSV.
        headlines="results/report/paper_headlines.csv",
        directions="results/report/effect_directions.csv",
    log:
        "logs/paper_comparison.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("paper_comparison.py"),
        studies=config["studies"],
        # The studies' own figures (checked here, before any job): editing them reruns the
        # comparison even where the study's tables stay the same.
        study_headlines=study_headlines(STUDIES),
        # The claims' thresholds and the config lists their `for_each` keys name: changing
        # a study's bases reruns the comparison with the claims they make.
        claims=claim_settings(
            config, "config/paper_headlines.yaml", study_headlines(STUDIES)
        ),
    script:
        "../scripts/paper_comparison.py"


rule paper_comparison_pages:
    input:
        "results/report/paper_headlines.csv",
        "results/report/effect_directions.csv",
    output:
        report(
            "results/report/paper_headlines.html",
            caption="../report/paper_comparison.rst",
            category="paper comparison",
            labels={"table": "paper headlines"},
        ),
        report(
            "results/report/effect_directions.html",
            caption="../report/paper_comparison.rst",
            category="paper comparison",
            labels={"table": "effect directions"},
        ),
    log:
        "logs/paper_comparison_pages.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_page.py"),
        titles=["paper headlines", "effect directions"],
    script:
        "../scripts/table_page.py"


rule leaderboard:
    input:
        grades=lambda wildcards: leaderboard_grades(config),
        models=lambda wildcards: [
            paths.model_dir(base, recipe)
            for base, recipe in leaderboard_models(config)
        ],
    output:
        # The report shows the table as a page (rule leaderboard_page), with its CSV.
        table="results/report/leaderboard.csv",
        replicates="results/report/leaderboard.replicates.parquet",
    log:
        "logs/leaderboard.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("leaderboard.py"),
        models=lambda wildcards: leaderboard_models(config),
        leaderboard=canonical(config.get("leaderboard")),
        studies={s.name: s.models(config) for s in STUDIES},
    script:
        "../scripts/leaderboard.py"


rule leaderboard_page:
    input:
        "results/report/leaderboard.csv",
    output:
        report(
            "results/report/leaderboard.html",
            caption="../report/leaderboard.rst",
            category="leaderboard",
            labels={"table": "leaderboard"},
        ),
    log:
        "logs/leaderboard_page.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_page.py"),
        titles=["leaderboard"],
    script:
        "../scripts/table_page.py"


rule provenance_index:
    input:
        report_inputs(),
    output:
        # The report shows the index as a page (rule provenance_page), with its CSV.
        "results/report/provenance.csv",
    log:
        "logs/provenance_index.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("provenance_index.py"),
    script:
        "../scripts/provenance_index.py"


rule provenance_page:
    input:
        "results/report/provenance.csv",
    output:
        report(
            "results/report/provenance.html",
            caption="../report/provenance.rst",
            category="provenance",
            labels={"table": "provenance index"},
        ),
    log:
        "logs/provenance_page.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_page.py"),
        titles=["provenance index"],
    script:
        "../scripts/table_page.py"


rule study_cost:
    input:
        tables=lambda wildcards: paths.tables_dir(wildcards.study),
        plots=lambda wildcards: paths.plots_dir(wildcards.study),
    output:
        # The report shows the table as a page (rule cost_page), with its CSV.
        "results/report/cost/{study}.csv",
    log:
        "logs/study_cost/{study}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("study_cost.py"),
    script:
        "../scripts/study_cost.py"


rule cost_page:
    input:
        "results/report/cost/{study}.csv",
    output:
        report(
            "results/report/cost/{study}.html",
            caption="../report/cost.rst",
            category="{study}",
            subcategory="cost",
            labels={"table": "cost"},
        ),
    log:
        "logs/cost_page/{study}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("table_page.py"),
        titles=lambda wildcards: [f"{wildcards.study}: cost"],
    script:
        "../scripts/table_page.py"
