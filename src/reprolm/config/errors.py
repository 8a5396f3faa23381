"""The error every config check raises, and the check that a name is declared."""

from __future__ import annotations

import difflib
from collections.abc import Mapping


class ConfigError(ValueError):
    pass


def require(name, allowed: Mapping | list, where: str) -> None:
    """``name`` is one of ``allowed``; otherwise an error naming the key, the allowed values
    and the closest of them."""
    if name in allowed:
        return
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{where}: {name!r} is not declared; allowed: {sorted(allowed)}{hint}")
