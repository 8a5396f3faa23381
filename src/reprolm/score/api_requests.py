"""Requests to a judge's API endpoint: how often a transient failure is sent again, and the
error a failed request raises."""

from __future__ import annotations

# How often a request that failed transiently (no connection, a timeout, HTTP 408, 409, 429
# or 5xx) is sent again before the job fails.
DEFAULT_MAX_RETRIES = 5


def request_failure(judge: str, base_url: str, error: Exception, max_retries: int, api_key: str) -> RuntimeError:
    """A failed request as an error naming the judge: transient failures were retried
    ``max_retries`` times, other refusals (a bad request, a refused key) not at all. The API
    key is masked in the endpoint's message, which may quote a refused key back."""
    import openai

    if isinstance(error, openai.APIStatusError):
        transient = error.status_code in (408, 409, 429) or error.status_code >= 500
        what = error.message  # "Error code: 400 - {the endpoint's message}"
    else:  # openai.APIConnectionError, timeouts included
        transient, what = True, f"{type(error).__name__}: {error}"
    when = f"after {max_retries} retries" if transient else "(not retried)"
    return RuntimeError(f"judge {judge!r} at {base_url}: request failed {when}: {what}".replace(api_key, "***"))
