"""A real S3 API server on loopback for the storage tests: moto's server mode.

``s3_server`` starts one ``ThreadedMotoServer`` per test session on a free port of
127.0.0.1 and points every S3 client of this process and of its children (worker
processes, driver subprocesses) at it through the standard environment variables:
``AWS_ENDPOINT_URL`` and dummy credentials. ``s3_bucket`` gives each test a fresh
bucket. Nothing is mocked inside the clients: s3fs and boto3 talk HTTP to moto.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str

    def env(self) -> dict[str, str]:
        """The environment variables that point S3 clients at this server."""
        return {**ENV, "AWS_ENDPOINT_URL": self.endpoint_url}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    pytest.importorskip("moto", reason='needs the test extra: pip install -e ".[test]"')
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    info = S3Server(f"http://127.0.0.1:{port}")
    saved = {k: os.environ.get(k) for k in info.env()}
    os.environ.update(info.env())
    try:
        yield info
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(scope="session")
def _s3_admin(s3_server: S3Server):
    """One client for making and removing buckets (a new client costs ~0.3 s)."""
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=s3_server.endpoint_url, skip_instance_cache=True)


@pytest.fixture
def s3_bucket(_s3_admin) -> Iterator[str]:
    """A fresh, empty bucket's name; it is removed afterwards."""
    name = f"bucket-{uuid.uuid4().hex[:12]}"
    _s3_admin.mkdir(name)
    yield name
    _s3_admin.rm(name, recursive=True)
