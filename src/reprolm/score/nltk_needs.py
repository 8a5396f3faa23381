"""The NLTK data lm-eval tasks' checks read, by task: the lm-eval bridge looks for it before a
task runs, and the workflow fetches it (the nltk_data rule) while it parses, so it loads no
library."""

# Checks of lm-eval tasks that need NLTK data, which lm-eval downloads on first use: offline
# they cannot run. IFEval counts sentences with punkt_tab.
NLTK_DATA_NEEDED = {"ifeval": {"length_constraints:number_sentences": "tokenizers/punkt_tab"}}
