"""The error every config check raises, and the check that a name is declared."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

# The key a message is about, as it opens the message: ``recipes.sft.base: ...``,
# ``study_modules[0]: ...``.
_KEY = re.compile(r"([A-Za-z_][\w-]*(?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*): ")
# What a dry run's warning ends with where a real run would refuse before its first job: the
# rehearsal, a dry run, reads these as the real run's refusals.
REAL_RUN_REFUSED = "a real run is refused before its first job"


class ConfigError(ValueError):
    """A config the workflow refuses. Its message opens with the key it is about, as dotted
    path (``recipes.sft.base: ...``), so that the file that set the key can be named
    (:func:`reprolm.config.overlays.naming_the_file`)."""

    @property
    def key(self) -> tuple[str, ...] | None:
        """The key the message opens with, as path parts (list indices dropped); None when it
        opens with something else (a file's path)."""
        found = _KEY.match(str(self))
        if found is None:
            return None
        return tuple(re.sub(r"\[\d+\]", "", part) for part in found.group(1).split("."))


def require(name, allowed: Mapping | list, where: str) -> None:
    """``name`` is one of ``allowed``; otherwise an error naming the key, the allowed values
    and the closest of them."""
    if name in allowed:
        return
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{where}: {name!r} is not declared; allowed: {sorted(allowed)}{hint}")
