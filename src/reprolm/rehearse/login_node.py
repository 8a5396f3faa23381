"""What the real run needs from the host it is submitted from, checked there before any job:
access to every gated hub repository it downloads, the API keys of the endpoints it asks, and
room on disk for the models and checkpoints it writes. Each check returns verdict lines (a
failure, then what to change); none downloads anything or prints a secret.

- Hub access: each hub repository the run will download (its download job is in the DAG and
  its folder is not there yet) is asked the hub's own access check (``HfApi.auth_check``'s
  request, with this host's token): a gated repository whose licence this token has not accepted
  fails, as its download job would, hours in. With ``HF_HUB_OFFLINE`` set the downloads read
  the local cache: unchecked, said once.
- Weights: each hub base model the run downloads must ship its weights as safetensors, the
  only weight files the download takes (``reprolm.models.base``): the hub's file list of the
  pinned revision is read (no download), and a repository with only PyTorch ``.bin`` weights
  (or none) fails, naming the conversion.
- API keys: every endpoint base model and API judge a job of the DAG asks (its ``base`` or
  ``judge``) needs its ``api_key_env`` set here, where the API jobs run; a missing one is
  named with the entries that read it, never a value.
- Disk: the models and checkpoints of the run's jobs, as ``reprolm plan`` sizes them (a
  finetune's two checkpoints and final weights, ``CHECKPOINT_BYTES`` a parameter; a
  downloaded or merged model's weights at 2 bytes a parameter), against the free space of the
  file system each output tree (``results/``, ``resources/``) is on; trees on one file system
  share its space. Outputs already there take no more. Datasets, generations and scores
  (megabytes) are not counted.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from reprolm.config.hub_ids import WORKERS, HubId, config_hub_ids, hub_offline
from reprolm.models.parameters import model_parameters
from reprolm.need import CHECKPOINT_BYTES
from reprolm.paths import base_model_dir, hub_model_dir, raw_dir
from reprolm.stages import rule_stage

# Seconds the hub has to answer each access check.
ACCESS_TIMEOUT_S = 10.0
# A model's weights as the hub and a merge store them: bf16 or fp16, 2 bytes a parameter.
STORED_BYTES = 2
OUTPUT_TREES = ("results", "resources")


@dataclass(frozen=True)
class DagJob:
    """One job of the run (submitted or on this host): its rule, wildcards and outputs."""

    rule: str
    wildcards: Mapping[str, str]
    outputs: tuple[str, ...]


# Hub access.


def download_folder(hub_id: HubId) -> str:
    """The folder the run downloads a hub id into."""
    section, name = hub_id.key.split(".")[:2]
    if section == "base_models":
        return base_model_dir(name)
    if section == "sources":
        return raw_dir(name)
    return hub_model_dir(hub_id.repo)


def pending_hub_ids(config: Mapping, jobs: Iterable[DagJob], workdir: Path) -> list[HubId]:
    """The hub ids the run will download: their folder is a job's output and not there yet."""
    outputs = {output for job in jobs for output in job.outputs}
    return [
        hub_id
        for hub_id in config_hub_ids(config)
        if download_folder(hub_id) in outputs and not (workdir / download_folder(hub_id)).exists()
    ]


def access_problem(hub_id: HubId, timeout: float = ACCESS_TIMEOUT_S) -> str | None:
    """Why this host's token cannot download ``hub_id`` (the hub's access check, the request
    ``HfApi.auth_check`` makes, here with a time limit), or why a base model's download would
    hold no weights (:func:`weights_problem`), or None. Any other failure (no network, a
    timeout, a server error) is raised."""
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = f"{constants.ENDPOINT}/api/{hub_id.kind}s/{hub_id.repo}/auth-check"
    try:
        hf_raise_for_status(get_session().get(url, headers=build_hf_headers(), timeout=timeout))
    except GatedRepoError:
        return (
            f"{hub_id.repo} is gated and this host's hub token has not been granted access: accept its licence "
            f"at https://huggingface.co/{'datasets/' if hub_id.kind == 'dataset' else ''}{hub_id.repo} with the "
            "account of the token (`hf auth login`; docs/cluster.md), then rehearse again"
        )
    except RepositoryNotFoundError:
        return f"{hub_id.repo} is not on the hub or is private to another account than this host's token's"
    if hub_id.kind == "model" and hub_id.key.startswith("base_models."):
        return weights_problem(hub_id, timeout)
    return None


def weights_problem(hub_id: HubId, timeout: float = ACCESS_TIMEOUT_S) -> str | None:
    """Why the download of base model ``hub_id`` would hold no weights (the files of its
    revision, the lock's where the run is pinned, as the hub lists them), or None."""
    from huggingface_hub import HfApi

    files = [
        sibling.rfilename
        for sibling in HfApi().model_info(hub_id.repo, revision=hub_id.revision, timeout=timeout).siblings or []
    ]
    # (the folder's own files: where the download looks, and transformers loads from)
    files = [name for name in files if "/" not in name]
    if any(name.endswith(".safetensors") for name in files):
        return None
    pytorch = [name for name in files if name.endswith(".bin") and "pytorch_model" in name]
    if pytorch:
        return (
            f"{hub_id.repo} ships its weights only as PyTorch .bin files ({len(pytorch)}, e.g. {pytorch[0]}), and the "
            "download takes safetensors only: convert them (transformers: `AutoModelForCausalLM.from_pretrained(REPO)"
            ".save_pretrained(DIR, safe_serialization=True)`, or the hub's safetensors conversion: "
            "https://huggingface.co/spaces/safetensors/convert) and point the config at the converted copy"
        )
    return f"{hub_id.repo} lists no weight files (no .safetensors, no pytorch_model .bin) at this revision"


def hub_access_problems(hub_ids: list[HubId], environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(failures, warnings) as verdict lines: one failure per repository the run cannot
    download, naming the config key; the hub not answering fails too (the downloads would),
    and offline they go unchecked with a warning."""
    repos: dict[tuple[str, str], HubId] = {}
    for hub_id in hub_ids:
        repos.setdefault((hub_id.kind, hub_id.repo), hub_id)
    if not repos:
        return [], []
    if hub_offline(environ):
        return [], [
            f"- warning: hub access of {len(repos)} repositories to download unchecked: HF_HUB_OFFLINE is set "
            "(their downloads read the local cache)"
        ]

    def answer(hub_id: HubId) -> tuple[str | None, str | None]:
        try:
            return access_problem(hub_id), None
        except Exception as error:  # no network, a timeout, a server error
            return None, f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"

    asked = list(repos.values())
    # One question first: a hub that does not answer it (no network) is not asked the rest.
    answers = [answer(asked[0])]
    if answers[0][1] is None:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            answers += list(pool.map(answer, asked[1:]))
    failures = [f"- hub access ({hub_id.key}): {problem}" for hub_id, (problem, _) in zip(asked, answers) if problem]
    unanswered = [(hub_id, why) for hub_id, (_, why) in zip(asked, answers) if why]
    if unanswered:
        hub_id, why = unanswered[0]
        count = len(asked) if len(answers) == 1 else len(unanswered)
        failures.append(
            f"- hub access: the hub did not answer for {count} of {len(asked)} repositories to download, "
            f"e.g. {hub_id.repo} ({why}); their downloads on this host would fail the same way"
        )
        failures.append("  change: run where the hub is reachable, or download them and set HF_HUB_OFFLINE=1")
    return failures, []


# API keys.


def api_key_users(config: Mapping, jobs: Iterable[DagJob]) -> dict[str, list[str]]:
    """Each API key variable the run's jobs read, and the config entries that name it."""
    bases, judges = set(), set()
    for job in jobs:
        bases.add(job.wildcards.get("base"))
        judges.add(job.wildcards.get("judge"))
    users: dict[str, list[str]] = defaultdict(list)
    for name, spec in config.get("base_models", {}).items():
        endpoint = spec.get("endpoint")
        if endpoint and name in bases:
            users[endpoint["api_key_env"]].append(f"base_models.{name}")
    for name, spec in config.get("judges", {}).items():
        if spec.get("api_key_env") and name in judges:
            users[spec["api_key_env"]].append(f"judges.{name}")
    return dict(users)


def missing_api_keys(users: Mapping[str, list[str]], environ: Mapping[str, str]) -> list[str]:
    """Verdict lines for each API key variable unset (or empty) on this host: the API jobs run
    here and each would fail on its first request. Only names, never a value."""
    lines = []
    for variable, entries in sorted(users.items()):
        if environ.get(variable):
            continue
        shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
        lines.append(f"- API key: environment variable {variable} is not set on this host, and {shown} read it")
        lines.append(f"  change: export {variable} before the run (or leave out what asks that API)")
    return lines


# Disk.


def output_bytes(job: DagJob, config: Mapping, workdir: Path) -> dict[str, int]:
    """Bytes each of the job's model outputs not yet there will take (see the module's doc)."""
    sizes = {}
    for output in job.outputs:
        if (workdir / output).exists():
            continue
        base = job.wildcards.get("base")
        if base not in config.get("base_models", {}):
            continue
        if output == base_model_dir(base):
            per_parameter = STORED_BYTES
        elif output.startswith(f"results/models/{base}/"):
            # A training job keeps its checkpoints; a merge writes weights.
            per_parameter = CHECKPOINT_BYTES if rule_stage(job.rule).trains else STORED_BYTES
        else:
            continue
        parameters, _ = model_parameters(config, base, workdir)
        if parameters:
            sizes[output] = parameters * per_parameter
    return sizes


def file_system_of(path: Path) -> Path:
    """The nearest existing folder of ``path`` (itself if there), links resolved."""
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def disk_problems(
    jobs: Iterable[DagJob], config: Mapping, workdir: Path, free: Callable[[Path], int] = free_bytes
) -> tuple[list[str], list[str]]:
    """(failures, notes): a failure per file system the run's models and checkpoints would
    fill (its trees' need against its free space); a note of each need."""
    need: dict[str, int] = defaultdict(int)
    for job in jobs:
        for output, size in output_bytes(job, config, workdir).items():
            need[output.split("/", 1)[0]] += size
    by_device: dict[int, list[str]] = defaultdict(list)
    places: dict[int, Path] = {}
    for tree in OUTPUT_TREES:
        place = file_system_of(workdir / tree)
        device = os.stat(place).st_dev
        by_device[device].append(tree)
        places.setdefault(device, place)
    failures, notes = [], []
    for device, trees in by_device.items():
        wanted = sum(need[tree] for tree in trees)
        if not wanted:
            continue
        available = free(places[device])
        named = " and ".join(f"{tree}/ (~{need[tree] / 1e9:,.0f} GB)" for tree in trees)
        if wanted > available:
            failures.append(
                f"- disk: {named} need ~{wanted / 1e9:,.0f} GB for the run's models and checkpoints, and their "
                f"file system ({places[device]}) has {available / 1e9:,.0f} GB free"
            )
            failures.append(
                f"  change: free space there, or put {'/ and '.join(trees)}/ on a larger file system (a link)"
            )
        else:
            notes.append(f"Disk: {named} need ~{wanted / 1e9:,.0f} GB of {available / 1e9:,.0f} GB free")
    return failures, notes
