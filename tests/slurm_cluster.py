"""A real single-node SLURM cluster for the tests, started by hand.

munged, MariaDB, slurmdbd, slurmctld and slurmd run as background processes of the test
session (no systemd here). Everything lives in one state directory with its own sockets and
free TCP ports, so a system munged or MariaDB, if any, is never touched; the one thing
outside it is a symlink at /etc/slurm/slurm.conf (see DEFAULT_CONF), made only where no
real configuration exists. The node is called `localhost` (the machine's hostname is not)
and has two fake GPUs backed by character devices, which is what SLURM's gres/gpu plugin
needs to schedule and count them and to set `CUDA_VISIBLE_DEVICES`. slurmdbd makes `sacct`
work, which the Snakemake SLURM executor uses by default to follow its jobs.

The Debian packages come from scripts/install-system-deps.sh (`make test`, `make system-deps`); this module
installs nothing. Root is required (daemons run as root, munged as user `munge`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = (
    "munged",
    "mariadb-install-db",
    "mariadbd",
    "slurmdbd",
    "slurmctld",
    "slurmd",
    "sbatch",
    "srun",
    "squeue",
    "scancel",
    "sacct",
    "sinfo",
    "scontrol",
)
# The daemons live in sbin, which a non-login shell's PATH may lack.
PATH = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
# One fixed place, so that a session killed before its teardown is cleaned up by the next.
STATE_DIR = Path(tempfile.gettempdir()) / "reprolm-slurm"
NODE = "localhost"
PARTITION = "debug"
# A second partition on the same node and a node feature: where a job lands shows whether
# the config's per-model routing (partition, constraint) reached sbatch.
GPU_PARTITION = "gpu"
# Its jobs preempt the other partitions' (requeued after GRACE_TIME_S of SIGTERM).
URGENT_PARTITION = "urgent"
GRACE_TIME_S = 10
# Seconds a requeued job waits before it may start again (and a job step's credential lives).
CRED_EXPIRE_S = 15
# Partitions of nodes with a real cluster's limits, for `reprolm rehearse` to have judged by
# `sbatch --test-only`: each node is declared State=CLOUD (powered down, no slurmd, never
# resumed: ResumeProgram is /bin/true), which SLURM 22.05 still counts as available when it
# answers --test-only; nodes that are DOWN or never registered make it refuse every request.
# No job ever runs on them; the tests that run jobs use the partitions above.
REHEARSAL_PARTITIONS = {
    # name: (nodes, CPUs per node, memory per node in MB, GPUs per node, GPU type, MaxTime)
    "gpu_a100": ("gpua[1-2]", 64, 512000, 4, "a100", "2-00:00:00"),
    "gpu_h100": ("gpuh[1-2]", 96, 1024000, 8, "h100", "1-00:00:00"),
    "cpu_long": ("cpul[1-2]", 32, 1024000, 0, None, "3-00:00:00"),
}
NODE_FEATURE = "fakegpu"
CLUSTER_NAME = "reprolm"
GPU_TYPE = "fake"
GPUS = 2
# Jobs without --mem get this much per CPU; without it every job would take the whole node.
MEM_PER_CPU_MB = 500
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20
# The executor's job step strips every SLURM_* variable, SLURM_CONF included, before its
# inner `srun`, which then reads only this compiled-in path; it points at our config.
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")
# Daemons in start order; teardown goes in reverse.
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if shutil.which(name, path=PATH) is None]


@dataclass
class SlurmCluster:
    """What a test needs to submit to the cluster; `env` carries SLURM_CONF to every client."""

    root: Path
    slurm_conf: Path
    env: dict
    partition: str = PARTITION
    gpu_partition: str = GPU_PARTITION
    node_feature: str = NODE_FEATURE
    node: str = NODE
    gpus: int = GPUS
    gpu_type: str = GPU_TYPE
    cpus: int = 1
    memory_mb: int = 0
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.processes.items()}

    def run(self, *command: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def sacct(self, *args: str) -> list[dict]:
        """Job records from the accounting database, one dict per line (job and steps)."""
        fields = (
            "JobID",
            "JobName",
            "State",
            "ExitCode",
            "Partition",
            "Constraints",
            "ReqTRES",
            "AllocTRES",
            "Comment",
        )
        out = self.run("sacct", "--allusers", "--parsable2", "--noheader", f"--format={','.join(fields)}", *args).stdout
        return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _chown(path: Path, user: str) -> None:
    shutil.chown(path, user, user)


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that is gone."""
    try:
        return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return False


def _terminate(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if the daemon is still there after STOP_TIMEOUT_S."""
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT_S)


def _terminate_pid(pid: int) -> None:
    """The same for a daemon a previous session started (not our child: poll /proc)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _alive(pid):
            return


def _wait_for(what: str, check, timeout: float, logs: list[Path], processes: dict) -> None:
    """Poll `check` until it holds; fail early, with the daemons' logs, if a daemon died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        dead = [name for name, process in processes.items() if process.poll() is not None]
        if dead:
            problem = f"{', '.join(dead)} exited while waiting for {what}"
            break
        time.sleep(0.2)
    else:
        problem = f"timed out after {timeout} s waiting for {what}"
    tails = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in logs if log.exists())
    raise RuntimeError(f"SLURM test cluster: {problem}\n{tails}")


def _cancel_jobs(env: dict) -> None:
    """Cancel every job and wait until none is left: slurmstepd outlives slurmd."""

    def no_jobs() -> bool:
        out = subprocess.run(
            ["squeue", "--noheader", "--format=%i"], env=env, capture_output=True, text=True, timeout=10
        )
        return out.returncode != 0 or not out.stdout.strip()

    try:
        subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=10)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not no_jobs() and time.monotonic() < deadline:
            time.sleep(0.5)
    except subprocess.TimeoutExpired:
        pass


def _stop_leftovers(root: Path) -> None:
    """Stop what a previous session left running (it recorded its PIDs), then forget it."""
    record = root / "pids.json"
    if record.exists():
        state = json.loads(record.read_text())
        if _alive(state["pids"].get("slurmctld", 0) or 0):
            _cancel_jobs(state["env"])
        for name in reversed(DAEMONS):
            pid = state["pids"].get(name)
            # The PID may have been reused since; only stop the daemon we started.
            if pid and _alive(pid) and Path(f"/proc/{pid}/exe").resolve().name.startswith(name):
                _terminate_pid(pid)
    if _ours(DEFAULT_CONF, root):
        DEFAULT_CONF.unlink()
    shutil.rmtree(root, ignore_errors=True)


def _ours(link: Path, root: Path) -> bool:
    return link.is_symlink() and Path(os.readlink(link)).is_relative_to(root)


def _link_default_conf(slurm_conf: Path, root: Path) -> None:
    if DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink():
        if not _ours(DEFAULT_CONF, root):
            raise RuntimeError(
                f"{DEFAULT_CONF} exists and is not the test cluster's: refusing to replace a real SLURM configuration"
            )
        DEFAULT_CONF.unlink()
    DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
    DEFAULT_CONF.symlink_to(slurm_conf)


def _hardware() -> dict:
    """The node's CPU layout and memory as slurmd itself detects them (`slurmd -C`)."""
    line = subprocess.run(
        ["slurmd", "-C"], env=dict(os.environ, PATH=PATH), capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()[0]
    fields = dict(item.split("=", 1) for item in line.split())
    return {
        key: int(fields[key])
        for key in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    }


def _node_memory(hw: dict) -> int:
    """A little less than detected: slurmd drains a node that has less than configured."""
    return max(1024, hw["RealMemory"] - 1024)


def _configs(root: Path, ports: dict, hw: dict) -> Path:
    etc, run, log = root / "etc", root / "run", root / "log"
    memory = _node_memory(hw)
    layout = " ".join(
        f"{key}={hw[key]}" for key in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    )
    devices = [root / "dev" / f"fakegpu{i}" for i in range(GPUS)]
    for device in devices:
        # gres/gpu accepts only character devices; /dev/null's numbers (1, 3) do.
        os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))
    munge_socket = root / "munge" / "munge.socket"
    _write(
        etc / "gres.conf",
        "AutoDetect=off\n" + "".join(f"NodeName={NODE} Name=gpu Type={GPU_TYPE} File={device}\n" for device in devices),
    )
    _write(
        etc / "slurmdbd.conf",
        f"""\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports["dbd"]}
SlurmUser=root
PidFile={run}/slurmdbd.pid
LogFile={log}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
# slurmdbd runs as root and MariaDB's root logs in by unix socket identity, no password.
StorageUser=root
StorageLoc=slurm_acct_db
""",
        mode=0o600,
    )
    return _write(
        etc / "slurm.conf",
        f"""\
ClusterName={CLUSTER_NAME}
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={ports["ctld"]}
SlurmdPort={ports["slurmd"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: a job step's credential lifetime, which is also how long a requeued job waits
# before it may start again (default 120 s; tests/test_slurm_stops.py requeues one).
AuthInfo=socket={munge_socket},cred_expire={CRED_EXPIRE_S}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={log}/slurmctld.log
SlurmdLogFile={log}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups on these machines: track processes via /proc, bind tasks by affinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
DefMemPerCPU={MEM_PER_CPU_MB}
# Finished jobs stay visible to squeue/scontrol for an hour (status fallback, debugging).
MinJobAge=3600
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
# A job in the urgent partition preempts what it needs from the others' jobs: they get
# SIGTERM, GraceTime seconds to save, then are requeued (tests/test_slurm_stops.py).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={ports["dbd"]}
# Connections to slurmdbd (slurmctld, sacct) take their munge socket from here, not AuthInfo.
AccountingStoragePass={munge_socket}
AccountingStorageTRES=gres/gpu,gres/gpu:{GPU_TYPE}
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
# Keep sbatch --comment in the database: the Snakemake executor puts the rule name there.
AccountingStoreFlags=job_comment
GresTypes=gpu
# The rehearsal's nodes (REHEARSAL_PARTITIONS): powered-down cloud nodes that nothing powers
# up or down (SuspendTime=INFINITE), shown by sinfo and scontrol (PrivateData=cloud). They come
# before the node named localhost: slurmctld 22.05 takes every node declared after that one
# for a duplicate of it (fatal: Duplicated NodeHostName).
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=INFINITE
PrivateData=cloud
{_rehearsal_nodes()}
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={NODE} {layout} RealMemory={memory} Gres=gpu:{GPU_TYPE}:{GPUS} Features={NODE_FEATURE} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName={GPU_PARTITION} Nodes={NODE} Default=NO MaxTime=INFINITE State=UP GraceTime={GRACE_TIME_S}
PartitionName={URGENT_PARTITION} Nodes={NODE} Default=NO MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
""",
    )


def _rehearsal_nodes() -> str:
    lines = []
    for name, (nodes, cpus, memory, gpus, gpu_type, max_time) in REHEARSAL_PARTITIONS.items():
        gres = f" Gres=gpu:{gpu_type}:{gpus}" if gpus else ""
        lines.append(
            f"NodeName={nodes} NodeAddr=127.0.0.1 NodeHostname={nodes} CPUs={cpus} RealMemory={memory}{gres} State=CLOUD"
        )
        lines.append(f"PartitionName={name} Nodes={nodes} Default=NO MaxTime={max_time} State=UP")
    return "\n".join(lines)


def start(root: Path = STATE_DIR) -> SlurmCluster:
    """Start the whole cluster; returns once the node is idle and `sacct` answers."""
    if os.geteuid() != 0:
        raise RuntimeError("the SLURM test cluster must be started as root")
    _stop_leftovers(root)
    for sub in ("etc", "run", "log", "state", "spool", "dev", "munge", "mysql"):
        (root / sub).mkdir(parents=True)
    # munged and mariadbd run as their own users and must reach their directories; munged
    # also wants its socket directory open to all and its key readable by itself only.
    root.chmod(0o755)
    _chown(root / "munge", "munge")
    _chown(root / "mysql", "mysql")
    hw = _hardware()
    ports = {"ctld": _free_port(), "slurmd": _free_port(), "dbd": _free_port()}
    slurm_conf = _configs(root, ports, hw)
    _link_default_conf(slurm_conf, root)
    env = dict(os.environ, SLURM_CONF=str(slurm_conf), PATH=PATH)
    cluster = SlurmCluster(root=root, slurm_conf=slurm_conf, env=env, cpus=hw["CPUs"], memory_mb=_node_memory(hw))
    logs = [root / "log" / f"{name}.log" for name in DAEMONS] + [root / "munge" / "munged.log"]

    def launch(name: str, command: list[str], extra_env: dict | None = None, **kwargs) -> None:
        with open(root / "log" / f"{name}.out", "w") as out:
            # A session of their own: a Ctrl-C in pytest must not kill them before teardown.
            cluster.processes[name] = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env, **(extra_env or {})),
                start_new_session=True,
                **kwargs,
            )
        logs.append(root / "log" / f"{name}.out")
        # What the next session needs to clean up after this one, should it die unexpectedly.
        leftovers = {"pids": cluster.pids, "env": {"SLURM_CONF": str(slurm_conf), "PATH": env["PATH"]}}
        _write(root / "pids.json", json.dumps(leftovers))

    def wait_for(what: str, check) -> None:
        _wait_for(what, check, START_TIMEOUT_S, logs, cluster.processes)

    try:
        key = root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(128))
        key.chmod(0o400)
        _chown(key, "munge")
        munge_socket = root / "munge" / "munge.socket"
        launch(
            "munged",
            [
                "munged",
                "--foreground",
                f"--key-file={key}",
                f"--socket={munge_socket}",
                f"--pid-file={root}/munge/munged.pid",
                f"--log-file={root}/munge/munged.log",
                f"--seed-file={root}/munge/munged.seed",
            ],
            user="munge",
            group="munge",
        )
        wait_for("munged", munge_socket.exists)

        datadir = root / "mysql" / "data"
        mysql_socket = root / "mysql" / "mysqld.sock"
        cluster.run(
            "mariadb-install-db",
            "--no-defaults",
            "--user=mysql",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
            timeout=120,
        )
        launch(
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                "--user=mysql",
                f"--datadir={datadir}",
                f"--socket={mysql_socket}",
                f"--pid-file={root}/mysql/mariadbd.pid",
                "--skip-networking",
                "--innodb-buffer-pool-size=64M",
            ],
        )
        wait_for("mariadbd", mysql_socket.exists)

        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF. It has no MariaDB socket setting;
        # the MariaDB client library reads MYSQL_UNIX_PORT.
        launch("slurmdbd", ["slurmdbd", "-D"], extra_env={"MYSQL_UNIX_PORT": str(mysql_socket)})
        # slurmctld exits if slurmdbd does not answer on its first start.
        wait_for("slurmdbd", lambda: _listening(ports["dbd"]))
        launch("slurmctld", ["slurmctld", "-D", "-i", "-f", str(slurm_conf)])
        launch("slurmd", ["slurmd", "-D", "-N", NODE, "-f", str(slurm_conf)])

        def node_idle() -> bool:
            out = subprocess.run(
                ["sinfo", "--noheader", "--Node", f"--nodes={NODE}", "--format=%N %t"],
                env=env,
                capture_output=True,
                text=True,
                timeout=10,
            )
            # One line per partition the node is in.
            return out.returncode == 0 and set(out.stdout.splitlines()) == {f"{NODE} idle"}

        def sacct_works() -> bool:
            return (
                subprocess.run(["sacct", "--noheader", "-X"], env=env, capture_output=True, timeout=10).returncode == 0
            )

        wait_for("the node to be idle", node_idle)
        wait_for("sacct", sacct_works)
    except BaseException:
        stop(cluster)
        raise
    return cluster


def stop(cluster: SlurmCluster) -> None:
    """Cancel all jobs, then stop every daemon this module started, by PID, in reverse order."""
    if "slurmctld" in cluster.processes:
        _cancel_jobs(cluster.env)
    for name in reversed(DAEMONS):
        process = cluster.processes.pop(name, None)
        if process is not None:
            _terminate(process)
    if _ours(DEFAULT_CONF, cluster.root):
        DEFAULT_CONF.unlink()
    (cluster.root / "pids.json").unlink(missing_ok=True)
