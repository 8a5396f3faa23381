"""The hub ids a config names, asked of the hub on the submitting host before any job: a
misspelt model or dataset id (or revision) is a config error naming its key, where it would
otherwise pass the dry run and fail at its download in the hub library's words.

Never a reason to stop a run but a missing id: with ``HF_HUB_OFFLINE`` set, or the hub not
answering, the ids are named as unchecked, once. Ids the hub has confirmed are kept in a
small cache file, so that only new ones are asked again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from reprolm.errors import ConfigError
from reprolm.io import atomic_path
from reprolm.paths import on_the_hub

log = logging.getLogger(__name__)
# Ids the hub confirmed, beside lm-eval's task answers.
HUB_ID_CACHE = "resources/hub_ids.json"
# Seconds the hub has to answer each question: the check must never hold a run up for long.
TIMEOUT_S = 3.0
# Questions asked at once (a paper config names about a hundred ids).
WORKERS = 16
# The values huggingface_hub reads as true (huggingface_hub.constants.ENV_VARS_TRUE_VALUES).
TRUE_VALUES = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class HubId:
    key: str  # where the config names it: base_models.llama3_8b.hub.path
    repo: str
    kind: str  # model or dataset
    revision: str | None = None

    @property
    def revision_key(self) -> str:
        return self.key.rsplit(".", 1)[0] + ".revision"

    @property
    def cache_key(self) -> str:
        return f"{self.kind}:{self.repo}@{self.revision or ''}"


def config_hub_ids(config: Mapping) -> list[HubId]:
    """Every hub id ``config`` names, by key: base models' checkpoints and the tokenizers
    their chat templates come from, hub sources' datasets, metrics' sentence encoders."""
    ids = []
    for name, spec in config.get("base_models", {}).items():
        hub = spec.get("hub")
        if not hub:
            continue
        ids.append(HubId(f"base_models.{name}.hub.path", hub["path"], "model", hub.get("revision")))
        template = hub.get("chat_template_from")
        if template and on_the_hub(template):
            ids.append(HubId(f"base_models.{name}.hub.chat_template_from", template, "model"))
    for name, spec in config.get("sources", {}).items():
        hub = spec.get("hub")
        if hub and on_the_hub(hub["path"]):
            ids.append(HubId(f"sources.{name}.hub.path", hub["path"], "dataset", hub.get("revision")))
    for name, settings in config.get("metrics", {}).items():
        encoder = settings.get("encoder", "packaged")
        if encoder != "packaged" and on_the_hub(encoder):
            ids.append(HubId(f"metrics.{name}.encoder", encoder, "model"))
    return ids


def hub_offline(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets huggingface_hub offline."""
    value = environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in TRUE_VALUES


def ask_hub(hub_id: HubId, timeout: float) -> str | None:
    """What is wrong with ``hub_id`` by the hub's answer, as a config error's message; None
    where the hub has it (a gated repository included: access is the download's matter). Any
    other failure (no network, a timeout, a server error) is raised."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError, RevisionNotFoundError

    ask = HfApi().model_info if hub_id.kind == "model" else HfApi().dataset_info
    try:
        ask(hub_id.repo, revision=hub_id.revision, timeout=timeout)
    except GatedRepoError:
        return None
    except HFValidationError as error:
        return f"{hub_id.key}: {hub_id.repo!r} is not a hub id ({str(error).splitlines()[0]})"
    except RevisionNotFoundError:
        return f"{hub_id.revision_key}: {hub_id.revision!r} is not a revision of the hub {hub_id.kind} {hub_id.repo!r}"
    except RepositoryNotFoundError:
        return (
            f"{hub_id.key}: {hub_id.repo!r} is not a {hub_id.kind} on the hub (or a private one this host's "
            "token cannot see); check its spelling"
        )
    return None


def _counted(ids: int) -> str:
    return f"{ids} hub id" + ("" if ids == 1 else "s")


def check_hub_ids(
    config: Mapping,
    cache: str | os.PathLike = HUB_ID_CACHE,
    warn: Callable[[str], None] = log.warning,
    environ: Mapping[str, str] = os.environ,
    timeout: float = TIMEOUT_S,
) -> None:
    """Refuse ``config`` if the hub lacks one of its ids or revisions (a ConfigError naming
    the first such key); ``warn`` once where ids go unchecked (offline, or the hub did not
    answer). Ids confirmed before, as ``cache`` records, are not asked again."""
    ids = config_hub_ids(config)
    if not ids:
        return
    if hub_offline(environ):
        warn(
            f"{_counted(len({hub_id.cache_key for hub_id in ids}))} of the config unchecked: HF_HUB_OFFLINE is set (a misspelt one fails "
            "only at its download; unset it on a host that reaches the hub to check them before any job)"
        )
        return
    cache = Path(cache)
    confirmed = set(json.loads(cache.read_text())) if cache.is_file() else set()
    # An id several keys name is asked once, as the first of them names it.
    first: dict[str, HubId] = {}
    for hub_id in ids:
        if hub_id.cache_key not in confirmed:
            first.setdefault(hub_id.cache_key, hub_id)
    asked = list(first.values())
    if not asked:
        return

    def answer(hub_id: HubId) -> tuple[str, str | None]:
        """("found", None), ("missing", the config error's message) or ("unanswered", why)."""
        try:
            problem = ask_hub(hub_id, timeout)
        except Exception as error:  # no network, a timeout, a server error: left unchecked
            return "unanswered", f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
        return ("missing", problem) if problem else ("found", None)

    # One question first: a hub that does not answer it (no network) is not asked the rest.
    probe = answer(asked[0])
    if probe[0] == "unanswered":
        warn(f"{_counted(len(asked))} of the config unchecked: the hub did not answer ({probe[1]})")
        return
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        rest = list(pool.map(answer, asked[1:]))
    answers = dict(zip((hub_id.cache_key for hub_id in asked), [probe, *rest], strict=True))
    # The first missing one in the config's order.
    for hub_id in ids:
        status, detail = answers.get(hub_id.cache_key, ("found", None))
        if status == "missing":
            raise ConfigError(detail)
    unanswered = [detail for status, detail in answers.values() if status == "unanswered"]
    if unanswered:
        warn(f"{_counted(len(unanswered))} of the config unchecked: the hub did not answer ({unanswered[0]})")
    found = {key for key, (status, _) in answers.items() if status == "found"}
    if found:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            tmp.write_text(json.dumps(sorted(confirmed | found), indent=0) + "\n")
