"""Records the top-level modules every Python process of the smoke imports (``run
--record-imports``): on PYTHONPATH, Python imports this at start-up in each process (the
Snakemake run, its jobs, the fork server's children, torchrun's workers). Each name is
appended once per process to ``$REPROLM_SMOKE_IMPORTS/<pid>``; the import itself goes on
unchanged (the finder finds nothing). The smoke maps the names to distributions afterwards.
A ``sitecustomize`` further down the path (an image's own) still runs, after this one."""

import importlib.util
import os
import sys

FOLDER = os.environ.get("REPROLM_SMOKE_IMPORTS")


class ImportRecorder:
    def __init__(self, folder):
        self.folder = folder
        self.seen = {}

    def find_spec(self, name, path=None, target=None):
        if path is None and "." not in name:
            pid = os.getpid()
            names = self.seen.setdefault(pid, set())
            if name not in names:
                names.add(name)
                try:
                    with open(os.path.join(self.folder, str(pid)), "a") as record:
                        record.write(name + "\n")
                except OSError:
                    pass
        return None


def run_the_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_sitecustomize_after_recorder", candidate)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


if FOLDER:
    sys.meta_path.insert(0, ImportRecorder(FOLDER))
run_the_next_sitecustomize()
