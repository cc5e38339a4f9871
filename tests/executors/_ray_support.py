"""The Ray cluster the Ray executor's tests run on (imported only when ray is installed)."""

from __future__ import annotations

import ray
from ray.cluster_utils import Cluster

OBJECT_STORE_BYTES = 100 * 1024**2  # per node; the tests move kilobytes


def start_cluster() -> Cluster:
    """Three nodes on this machine: the head and two racks with their own resources."""
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 4,
            "resources": {"head": 1},
            "include_dashboard": False,
            "object_store_memory": OBJECT_STORE_BYTES,
        },
    )
    for rack in ("rack_a", "rack_b"):
        cluster.add_node(num_cpus=2, resources={rack: 2}, object_store_memory=OBJECT_STORE_BYTES)
    cluster.wait_for_nodes()
    return cluster


def node_of(resource: str) -> str:
    """The id of the (one) live node that has ``resource``."""
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
    assert len(nodes) == 1, nodes
    return nodes[0]
