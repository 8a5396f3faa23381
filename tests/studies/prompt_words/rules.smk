# The prompt_words study's own step, included by the workflow because the study is
# registered (study_modules names study.py beside this file).
rule prompt_words:
    input:
        dataset="results/datasets/{dataset}/{split}.parquet",
    output:
        "results/scores/prompt_words/prompts/{dataset}/{split}.json",
    log:
        "logs/prompt_words/{dataset}/{split}.log",
    conda:
        os.path.join(ENVS, "core.yaml")
    script:
        "count_words.py"
