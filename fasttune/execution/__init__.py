"""How trials are described to executors: resource requests (as ``ray.tune.execution``)."""

from fasttune.execution.placement_groups import (
    PlacementGroupFactory,
    normalize_resources,
    resource_dict_to_pg_factory,
)

__all__ = ["PlacementGroupFactory", "normalize_resources", "resource_dict_to_pg_factory"]
