"""The fork server that a local run's job scripts start from (reprolm.forkserver), chosen by
the workflow's onstart: a served script's process, as it starts, hands the script to the
server (workflow/launcher/sitecustomize.py); it runs in a forked child with the script
process's streams, directory, environment, arguments and import path, its exit status and
signals pass through, and without a server, or for a script it does not serve (one not of
the run's rules), the script runs in place."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from reprolm import forkserver
from reprolm.provenance import content_hash
from workflow_helpers import copy_run, snakemake

# Every test here hands work to a real server, which imports torch, transformers and lm-eval first.
pytestmark = pytest.mark.slow
LAUNCHER = Path(__file__).parents[1] / "workflow" / "launcher"
SERVED = "job.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server as a run in a deep working directory gets it: its socket in a private
    temporary folder (a Unix socket path has at most 108 bytes)."""
    folder = tmp_path_factory.mktemp("forkserver")
    address = forkserver.socket_address(folder / ("nested_" * 12) / ".snakemake" / "forkserver")
    process = forkserver.launch(address, folder / "server.log")
    wait_until_serving(address, process)
    yield address, process
    process.terminate()
    process.wait()


def wait_until_serving(address: str, process: subprocess.Popen) -> None:
    """The server names its socket once it has imported the libraries."""
    deadline = time.monotonic() + 120
    while not os.path.exists(address):
        assert process.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def job_script(tmp_path: Path, body: str, name: str = SERVED) -> Path:
    """A job script where Snakemake writes it before running it: .snakemake/scripts/tmp<random>.<name>."""
    script = tmp_path / ".snakemake" / "scripts" / f"tmpa1b2c3d4.{name}"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(textwrap.dedent(body))
    return script


def job_environment(address: str | None, env: dict | None = None) -> dict:
    """The environment the server's start gives a local run's jobs."""
    environment = {k: v for k, v in os.environ.items() if k != forkserver.ADDRESS_VARIABLE}
    if address is not None:
        environment[forkserver.ADDRESS_VARIABLE] = address
    environment[forkserver.PREFIX_VARIABLE] = sys.prefix
    environment[forkserver.SCRIPTS_VARIABLE] = os.pathsep.join(["other.py", SERVED])
    environment.update(env or {})
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LAUNCHER), environment.get("PYTHONPATH")]))
    return environment


def run_script(
    tmp_path: Path,
    body: str,
    address: str | None,
    *args: str,
    env: dict | None = None,
    cwd: Path | None = None,
    name: str = SERVED,
) -> subprocess.CompletedProcess:
    script = job_script(tmp_path, body, name)
    return subprocess.run(
        [sys.executable, str(script.relative_to(tmp_path)), *args],
        cwd=cwd or tmp_path,
        env=job_environment(address, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


REPORT = """
    import json, os, sys
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv[1:],
                      "probe": os.environ.get("PROBE"), "nvml_check": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
                      "torch_preloaded": "torch" in sys.modules, "path0": sys.path[0]}))
    print("to stderr", file=sys.stderr)
"""


def test_a_script_runs_in_a_forked_child_with_the_callers_streams_directory_environment_and_arguments(server, tmp_path):
    address, process = server
    script = job_script(tmp_path, REPORT)
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = subprocess.run(
        [sys.executable, str(script), "a", "b"],
        cwd=workdir,
        env=job_environment(address, {"PROBE": "42", "PYTORCH_NVML_BASED_CUDA_CHECK": "0"}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    # The child of the server, not the script process itself.
    assert seen["ppid"] == process.pid
    assert seen["cwd"] == str(workdir) and seen["argv"] == ["a", "b"] and seen["probe"] == "42"
    # As Python would have it: the script's folder first on its path.
    assert seen["path0"] == str(script.parent)
    assert seen["torch_preloaded"]
    assert result.stderr.strip() == "to stderr"
    # The server counts GPUs through NVML (leaving CUDA to the jobs); the job has its own environment.
    assert b"PYTORCH_NVML_BASED_CUDA_CHECK=1" in Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
    assert seen["nvml_check"] == "0"


def test_only_the_owner_can_reach_the_server(server):
    address, _ = server
    assert os.stat(address).st_mode & 0o777 == 0o600


class CudaInitialisedTorchStandIn:
    """Stands in for torch after a library initialised CUDA (no GPU here)."""

    class cuda:
        @staticmethod
        def is_initialized() -> bool:
            return True


class CudaDriverStartedTorchStandIn:
    """Stands in for torch after torch.cuda.is_available() counted devices the default way:
    not initialised, but a child forked now is in a bad fork (no GPU here)."""

    class cuda:
        @staticmethod
        def is_initialized() -> bool:
            return False

        @staticmethod
        def _is_in_bad_fork() -> bool:
            return True


def test_a_server_whose_libraries_started_cuda_serves_no_job():
    assert forkserver.cuda_started({"torch": CudaInitialisedTorchStandIn})
    assert forkserver.cuda_started({"torch": CudaDriverStartedTorchStandIn})
    assert not forkserver.cuda_started({})
    # What the server really preloads here (CPU torch) leaves CUDA alone.
    import torch

    assert not forkserver.cuda_started({"torch": torch})


def test_without_a_server_the_script_runs_in_place(tmp_path):
    for address in (None, forkserver.OFF, str(tmp_path / "no-server.sock")):
        result = run_script(tmp_path, REPORT, address)
        assert result.returncode == 0, result.stderr
        seen = json.loads(result.stdout)
        assert not seen["torch_preloaded"]


def test_a_script_the_server_does_not_serve_runs_in_place(server, tmp_path):
    """A script of none of the run's rules, or any Python program that is not a Snakemake job
    script."""
    address, process = server
    unserved = json.loads(run_script(tmp_path, REPORT, address, name="unserved.py").stdout)
    assert unserved["ppid"] != process.pid and not unserved["torch_preloaded"]
    (tmp_path / "job.py").write_text(textwrap.dedent(REPORT))
    plain = subprocess.run(
        [sys.executable, "job.py"], cwd=tmp_path, env=job_environment(address), capture_output=True, text=True
    )
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["ppid"] != process.pid
    served = json.loads(run_script(tmp_path, REPORT, address).stdout)
    assert served["ppid"] == process.pid and served["torch_preloaded"]


def test_a_job_in_another_python_environment_runs_in_place(server, tmp_path):
    """A rule's conda environment (--software-deployment-method conda) has its own
    interpreter and packages: forking it from the server would run it in the server's."""
    address, process = server
    result = run_script(tmp_path, REPORT, address, env={forkserver.PREFIX_VARIABLE: str(tmp_path / "conda-env")})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["ppid"] != process.pid and not seen["torch_preloaded"]
    same = run_script(tmp_path, REPORT, address, env={forkserver.PREFIX_VARIABLE: sys.prefix})
    assert json.loads(same.stdout)["ppid"] == process.pid


def test_exit_status_and_failures_pass_through(server, tmp_path):
    address, _ = server
    assert run_script(tmp_path, "import sys\nsys.exit(3)\n", address).returncode == 3
    failed = run_script(tmp_path, "raise KeyError('the bad key')\n", address)
    assert failed.returncode == 1 and "KeyError: 'the bad key'" in failed.stderr
    message = run_script(tmp_path, "import sys\nsys.exit('a clear error')\n", address)
    assert message.returncode == 1 and "a clear error" in message.stderr


def test_a_job_uses_the_thread_count_snakemake_gave_it(server, tmp_path):
    address, _ = server
    body = "import torch\nprint(torch.get_num_threads())\n"
    assert run_script(tmp_path, body, address, env={"OMP_NUM_THREADS": "1"}).stdout.strip() == "1"
    assert run_script(tmp_path, body, address, env={"OMP_NUM_THREADS": "2"}).stdout.strip() == "2"


def test_the_job_imports_reprolm_from_the_callers_path(server, tmp_path):
    """Code edited during a run (or a PYTHONPATH to another copy) is the code a job runs."""
    address, _ = server
    library = tmp_path / "edited"
    (library / "reprolm").mkdir(parents=True)
    (library / "reprolm" / "__init__.py").write_text("EDITED = True\n")
    (library / "reprolm" / "forkserver.py").write_text(Path(forkserver.__file__).read_text())
    result = run_script(
        tmp_path,
        "import reprolm\nprint(getattr(reprolm, 'EDITED', False), reprolm.__file__)\n",
        address,
        env={"PYTHONPATH": str(library)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", str(library / "reprolm" / "__init__.py")]


COLLECTED = """
    import gc, json
    print(json.dumps({"frozen": gc.get_freeze_count(), "collected": len(gc.get_objects())}))
"""


def test_a_jobs_collections_leave_the_servers_objects_alone(server, tmp_path):
    """The server's imports are frozen: a job's garbage collections would otherwise walk every
    object of the preloaded libraries and copy the memory pages they sit on."""
    address, _ = server
    seen = json.loads(run_script(tmp_path, COLLECTED, address).stdout)
    assert seen["frozen"] > 10 * seen["collected"]


def test_a_job_started_before_the_server_is_ready_runs_in_place_and_later_ones_are_forked(tmp_path):
    address = forkserver.socket_address(tmp_path / ("nested_" * 12))
    process = forkserver.launch(address, tmp_path / "server.log")
    try:
        # Right after the launch the server is still importing torch: the job does not wait.
        early = json.loads(run_script(tmp_path, REPORT, address).stdout)
        assert not early["torch_preloaded"] and early["ppid"] != process.pid
        wait_until_serving(address, process)
        assert json.loads(run_script(tmp_path, REPORT, address).stdout)["ppid"] == process.pid
    finally:
        process.terminate()
        process.wait()
    # The server removed its socket and private folder when it ended.
    assert not Path(address).parent.exists()
    # A server killed while it imports never names its socket; jobs run in their own processes.
    address = str(tmp_path / "server.sock")
    process = forkserver.launch(address, tmp_path / "server.log")
    process.kill()
    process.wait()
    assert not os.path.exists(address)
    late = run_script(tmp_path, REPORT, address)
    assert late.returncode == 0 and not json.loads(late.stdout)["torch_preloaded"]


def test_a_deep_working_directory_gets_its_socket_in_a_private_temporary_folder(server, tmp_path):
    short = Path(tempfile.mkdtemp(prefix="run-"))
    assert (
        Path(forkserver.socket_address(short / ".snakemake" / "forkserver")).parent
        == short / ".snakemake" / "forkserver"
    )
    shutil.rmtree(short)
    address, process = server
    assert len(address) <= forkserver.MAX_SOCKET_PATH
    folder = Path(address).parent
    assert folder.name.startswith(forkserver.PRIVATE_FOLDER_PREFIX) and folder.stat().st_mode & 0o777 == 0o700
    assert json.loads(run_script(tmp_path, REPORT, address).stdout)["ppid"] == process.pid


def test_a_signal_to_the_script_process_reaches_the_job(server, tmp_path):
    address, _ = server
    marker = tmp_path / "child.pid"
    script = job_script(
        tmp_path, f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    )
    caller = subprocess.Popen([sys.executable, str(script)], env=job_environment(address))
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    child = int(marker.read_text())
    assert child != caller.pid
    caller.send_signal(signal.SIGTERM)
    assert caller.wait(timeout=30) != 0
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "the job outlived its script process"
        time.sleep(0.1)


def script_jobs(scripts: int, others: int = 0, benchmarked: int = 0) -> list[SimpleNamespace]:
    """Stand-ins for Snakemake jobs, as the server's start reads them: their rule's script and
    benchmark file."""

    def job(script, benchmark=None):
        return SimpleNamespace(rule=SimpleNamespace(script=script, benchmark=benchmark))

    return (
        [job("../scripts/job.py")] * scripts
        + [job(None)] * others
        + [job("../scripts/measured.py", "benchmarks/measured.tsv")] * benchmarked
    )


def test_the_server_serves_the_script_of_every_rule_with_one():
    assert forkserver.served_scripts(script_jobs(2, others=1, benchmarked=1)) == {"job.py", "measured.py"}
    assert forkserver.served_scripts(script_jobs(0, others=3)) == set()


def test_a_run_of_few_served_job_scripts_or_switched_off_starts_no_server(tmp_path, monkeypatch):
    few = script_jobs(forkserver.MIN_SCRIPT_JOBS - 1, others=10)
    assert forkserver.start(tmp_path, tmp_path / "log", few, launcher=LAUNCHER) is None
    monkeypatch.setenv(forkserver.ADDRESS_VARIABLE, forkserver.OFF)
    assert (
        forkserver.start(tmp_path, tmp_path / "log", script_jobs(forkserver.MIN_SCRIPT_JOBS), launcher=LAUNCHER) is None
    )
    assert list(tmp_path.iterdir()) == []


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    starter = tmp_path / "starter.py"
    starter.write_text(
        "from types import SimpleNamespace\nfrom reprolm import forkserver\n"
        "jobs = [SimpleNamespace(rule=SimpleNamespace(script='job.py', benchmark=None))] * forkserver.MIN_SCRIPT_JOBS\n"
        f"server = forkserver.start({str(tmp_path)!r}, {str(tmp_path / 'log')!r}, jobs, launcher={str(LAUNCHER)!r})\n"
        "print(server.pid)\n"
    )
    server_pid = int(subprocess.run([sys.executable, str(starter)], capture_output=True, text=True, check=True).stdout)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{server_pid}").exists():
        assert time.monotonic() < deadline, "the server outlived the process that started it"
        time.sleep(0.2)
    assert list(tmp_path.glob("*.sock*")) == []


@pytest.mark.workflow
def test_served_jobs_make_the_same_bytes_in_place_and_record_their_own_usage(default_run, tmp_path):
    """The default run's jobs came from the fork server (its log lists them); a dataset and a
    score run again in their own processes make the same bytes: a run of fewer served job
    scripts than ``MIN_SCRIPT_JOBS`` starts no server. A served finetune's record has the
    job's own peak memory (it holds torch and a model; its waiting script process a few MB)."""
    assert (default_run / "logs" / "forkserver.log").read_text().count("forked job process") > 150
    record = json.loads((default_run / "results/models/tiny_llama/dpo/provenance.json").read_text())
    assert record["execution"]["usage"]["max_rss_mb"] > 100
    outputs = ["results/datasets/tlg/test.parquet", "results/scores/answer_voting/tiny_llama/ce/gsm8k_samples.json"]
    assert len(outputs) < forkserver.MIN_SCRIPT_JOBS
    work = copy_run(default_run, tmp_path / "run", writable=outputs)
    snakemake(work, "--force", *outputs)
    # No server started and no job was forked.
    assert (work / "logs" / "forkserver.log").read_text() == (default_run / "logs" / "forkserver.log").read_text()
    for output in outputs:
        assert content_hash(work / output) == content_hash(default_run / output), output
