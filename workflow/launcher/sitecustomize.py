"""The local-run launcher: the workflow's onstart (reprolm.forkserver.start) puts this folder on
the PYTHONPATH of a local run's jobs when it starts a fork server, and Python imports this
module as each of their processes starts. A job script's process hands the script to the
server (reprolm.forkserver.hand_off); any other Python process goes on as it would."""

import os
import sys

# Only in the server's Python environment (a rule's conda env has none of reprolm).
if os.environ.get("REPROLM_FORKSERVER_PREFIX") == sys.prefix:
    from reprolm.forkserver import hand_off

    hand_off()
