"""The Ray executor's connection: the one this process has, or one it opens and closes.

Like SMAC3's Dask runner, the executor accepts a connection the user already opened
with ``ray.init(...)`` and never closes it; a connection it opened itself it closes
when it shuts down. Ray is imported here and nowhere at ``import fasttune``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from fasttune._support.cluster_address import require_ray
from fasttune._support.imports import import_optional

logger = logging.getLogger(__name__)

CLIENT_SERVER_RETRY_S = 1.0
"""The pause before the one new try of a Ray Client connection whose server failed to
start (:func:`_client_server_failed`)."""


def import_ray(where: str = "The Ray executor") -> ModuleType:
    """``ray``, or a :class:`~fasttune._support.imports.MissingDependencyError` with the
    ``pip install "fasttune[ray]"`` line."""
    require_ray(where)
    return import_optional("ray", extra="ray", feature=where)


class RayConnection:
    """A connection to a Ray cluster, opened on construction.

    Args:
        address: Passed to ``ray.init(address=...)`` when this process is not connected
            yet: ``"auto"``, ``"ray://host:10001"``, ``"host:6379"``, or None to start a
            Ray instance on this machine (as ``ray.init()`` does).
        init_kwargs: Further ``ray.init`` arguments, for a connection opened here.

    Raises:
        ConnectionError: If no cluster answers at ``address``, saying how to start one.
    """

    def __init__(self, address: str | None, init_kwargs: Mapping[str, Any] | None = None):
        ray = import_ray()
        self.ray = ray
        self.owned = not ray.is_initialized()
        self.address = address
        if not self.owned:
            return  # the user's connection: used as it is, never closed here
        kwargs = dict(init_kwargs or {})
        try:
            try:
                ray.init(address=address, **kwargs)
            except ConnectionError as exc:
                if not _client_server_failed(address, exc):
                    raise
                logger.warning(
                    "The Ray Client server at %s failed to start the session of this "
                    "driver (%s); trying once more in %.0f s.",
                    address, str(exc).splitlines()[0], CLIENT_SERVER_RETRY_S,
                )  # fmt: skip
                time.sleep(CLIENT_SERVER_RETRY_S)
                ray.init(address=address, **kwargs)
        except ConnectionError as exc:
            raise ConnectionError(
                f"fasttune could not connect to a Ray cluster at address={address!r} "
                f"({str(exc).rstrip('.')}). "
                "Start one on this machine with `ray start --head` (then use address='auto'), "
                "pass the address of a running cluster ('ray://<head>:10001' through Ray "
                "Client, '<head>:6379' from one of its nodes), or use address='local' for "
                "this machine's worker processes."
            ) from exc

    def close(self) -> None:
        """Disconnect if this object opened the connection (idempotent)."""
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
        self.owned = False


def _client_server_failed(address: str | None, exc: ConnectionError) -> bool:
    """Whether a ``ray://`` connection failed because the cluster's Ray Client proxy
    could not start this driver's own server process.

    The proxy starts one such process per connecting driver; under load it sometimes
    fails to (Ray's own client tests are flaky for it), and the next connection gets a
    new process on another port. The failed try leaves nothing connected (Ray's client
    disconnects on any error of its set-up), so a second try starts clean.
    """
    return (
        isinstance(address, str)
        and address.startswith("ray://")
        and isinstance(exc, ConnectionAbortedError)
        and "Initialization failure from server" in str(exc)
    )
