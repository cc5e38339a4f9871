"""The Ray cluster the Ray executor's tests run on (imported only when ray is installed)."""

from __future__ import annotations

import socket

import ray
from ray.cluster_utils import Cluster

OBJECT_STORE_BYTES = 100 * 1024**2  # per node; the tests move kilobytes


def start_cluster() -> Cluster:
    """Three nodes on this machine: the head and two racks with their own resources.

    The head also serves Ray Client on a free port of the loopback
    (``cluster.client_address``), as ``ray start --head`` does on 10001.
    """
    client_port = _free_port()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 4,
            "resources": {"head": 1},
            "include_dashboard": False,
            "object_store_memory": OBJECT_STORE_BYTES,
            "ray_client_server_port": client_port,
        },
    )
    cluster.client_address = f"ray://127.0.0.1:{client_port}"
    for rack in ("rack_a", "rack_b"):
        cluster.add_node(num_cpus=2, resources={rack: 2}, object_store_memory=OBJECT_STORE_BYTES)
    cluster.wait_for_nodes()
    return cluster


def node_of(resource: str) -> str:
    """The id of the (one) live node that has ``resource``."""
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
    assert len(nodes) == 1, nodes
    return nodes[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
