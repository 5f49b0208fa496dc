"""MLflow below its client, as tabsim uses it: the settings MLflow reads from the environment only (its file
store switch, its requests' timeout and retries), and one line for a tracking server that cannot be
reached. :class:`tabsim.runtime.trackers.MlflowTracker` writes with these, through MLflow's public client; nothing
here imports MLflow."""
from __future__ import annotations

import contextlib
import json
import math

from tabsim.base import defaults

TIMEOUT_SECONDS = 30  # the longest a tracker's server is waited for, per request (--track-timeout)
RETRIES = 1  # a request that fails or is not answered is tried once more, at once


def flat(config: dict, prefix: str = "") -> dict:
    """A nested config as MLflow parameters: ``{"train.steps": "300"}`` (lists and tables as JSON)."""
    out: dict = {}
    for k, v in config.items():
        if isinstance(v, dict) and v:
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, (list, dict)) else str(v)
    return out


@contextlib.contextmanager
def file_store(uri: str):
    """MLflow 3 refuses its file store unless ``MLFLOW_ALLOW_FILE_STORE`` is true: for a ``file:`` URI it is
    set while the block runs (and restored after), so the user's other MLflow calls are left as they were.

    Set, as :func:`bounded`'s variables, in the process that writes (the writer process, unless
    ``MlflowTracker(process=False)``): MLflow reads this switch from the environment only."""
    if not uri.startswith("file:"):
        yield
        return
    with defaults.while_unset({"MLFLOW_ALLOW_FILE_STORE": "true"}):
        yield


@contextlib.contextmanager
def bounded(timeout: float):
    """MLflow's requests to a tracking server bounded while the block runs: each is given up after ``timeout``
    seconds without an answer (``MLFLOW_HTTP_REQUEST_TIMEOUT``, whole seconds) and tried :data:`RETRIES`
    more time(s) (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``; MLflow's own defaults, 120 s and 7 retries with a
    doubling back-off, keep a dead server waited for 4 minutes, a silent one for 16). A variable the user
    set is left as set; MLflow reads both from the environment at every request."""
    ours = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(timeout))),
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(RETRIES)}
    with defaults.while_unset(ours):
        yield


def unreachable(err: BaseException, uri: str, timeout: float) -> Exception | None:
    """One line for a request to the tracking server at ``uri`` that was not answered or could not connect
    (``requests``' Timeout or ConnectionError, anywhere in ``err``'s chain), else None."""
    seen, kinds = set(), set()
    while err is not None and id(err) not in seen:  # MLflow's error, requests', urllib3's and its reason
        seen.add(id(err))
        kinds.add(type(err).__name__)
        reason = getattr(err.args[0], "reason", None) if err.args else None
        err = err.__cause__ or err.__context__ or (reason if isinstance(reason, BaseException) else None)
    if kinds & {"ReadTimeout", "ReadTimeoutError", "ConnectTimeout", "ConnectTimeoutError"}:
        return TimeoutError(f"the tracking server at {uri} answered nothing within {timeout:g} s (tried "
                            f"{RETRIES + 1} times; --track-timeout SECONDS)")
    if kinds & {"ConnectionError", "NewConnectionError", "ConnectionRefusedError"}:
        return ConnectionError(f"cannot connect to the tracking server at {uri} (tried {RETRIES + 1} times); "
                               "is it running?")
    return None

