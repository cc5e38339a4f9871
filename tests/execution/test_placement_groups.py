"""Tests for PlacementGroupFactory and the resource-dict helpers."""

from __future__ import annotations

import json
import math
import pickle

import cloudpickle
import pytest

from fasttune.execution import (
    PlacementGroupFactory,
    normalize_resources,
    resource_dict_to_pg_factory,
)


def make_pgf(*bundles: dict, strategy: str = "PACK", **kwargs) -> PlacementGroupFactory:
    return PlacementGroupFactory(list(bundles) or [{"CPU": 1}], strategy, **kwargs)


# --- PlacementGroupFactory -------------------------------------------------------------


def test_bundles_are_floats_and_resources_are_summed():
    pgf = make_pgf({"CPU": 1, "GPU": 0.5, "custom": 2}, {"CPU": 2}, {"CPU": 2})
    assert pgf.bundles == [{"CPU": 1.0, "GPU": 0.5, "custom": 2.0}, {"CPU": 2.0}, {"CPU": 2.0}]
    assert all(isinstance(v, float) for b in pgf.bundles for v in b.values())
    assert pgf.required_resources == {"CPU": 5.0, "GPU": 0.5, "custom": 2.0}
    assert pgf.head_cpus == 1.0
    assert pgf.strategy == "PACK"
    assert pgf.head_bundle_is_empty is False


def test_zero_amounts_are_dropped():
    pgf = make_pgf({"CPU": 2, "GPU": 0, "memory": 0})
    assert pgf.bundles == [{"CPU": 2.0}]
    assert pgf.required_resources == {"CPU": 2.0}


def test_head_without_cpu_has_zero_head_cpus():
    assert make_pgf({"GPU": 1}).head_cpus == 0.0


def test_empty_head_bundle_is_left_out_and_flagged():
    pgf = make_pgf({}, {"CPU": 2}, {"CPU": 3})
    assert pgf.head_bundle_is_empty is True
    assert pgf.bundles == [{"CPU": 2.0}, {"CPU": 3.0}]
    assert pgf.head_cpus == 0.0
    assert pgf.required_resources == {"CPU": 5.0}


def test_all_zero_head_counts_as_empty():
    assert make_pgf({"CPU": 0}, {"GPU": 1}).head_bundle_is_empty is True


def test_empty_head_and_no_workers_is_rejected():
    with pytest.raises(ValueError, match="no resources at all"):
        PlacementGroupFactory([{}])


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
def test_all_ray_strategies_are_accepted(strategy):
    assert make_pgf({"CPU": 1}, strategy=strategy).strategy == strategy


@pytest.mark.parametrize("strategy", ["pack", "CLUSTER", "", None, 1])
def test_unknown_strategy_is_rejected_naming_the_parameter(strategy):
    with pytest.raises(ValueError, match=r"strategy=.*PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"):
        PlacementGroupFactory([{"CPU": 1}], strategy)


@pytest.mark.parametrize(
    ("bundles", "pattern"),
    [
        ([], "at least one bundle"),
        ({"CPU": 1}, "must be a list of dicts"),
        ("CPU", "must be a list of dicts"),
        (None, "must be a list of dicts"),
        ([1], "bundle 0 must be a dict"),
        ([{"CPU": 1}, ["GPU", 1]], "bundle 1 must be a dict"),
        ([{"CPU": -1}], r"amount of 'CPU' must be a finite number >= 0, got -1"),
        ([{"CPU": 1}, {"GPU": -0.5}], r"bundle 1: the amount of 'GPU'"),
        ([{"CPU": "1"}], "must be a number"),
        ([{"CPU": True}], "must be a number"),
        ([{"CPU": math.nan}], "finite"),
        ([{"CPU": math.inf}], "finite"),
        ([{1: 1}], "resource names must be non-empty strings"),
        ([{"": 1}], "resource names must be non-empty strings"),
    ],
)
def test_malformed_bundles_are_rejected_naming_the_parameter(bundles, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        PlacementGroupFactory(bundles)
    assert "bundles" in str(info.value)


@pytest.mark.parametrize("key", ["cpu", "gpu"])
def test_lowercase_cpu_gpu_in_a_bundle_points_to_the_ray_name(key):
    with pytest.raises(ValueError, match=f"Use '{key.upper()}' instead"):
        PlacementGroupFactory([{key: 1}])


def test_bundles_property_returns_copies():
    pgf = make_pgf({"CPU": 1})
    pgf.bundles[0]["CPU"] = 99
    pgf.bundles.append({"GPU": 1})
    assert pgf.bundles == [{"CPU": 1.0}]
    assert pgf.required_resources == {"CPU": 1.0}


def test_input_bundles_are_not_shared():
    given = [{"CPU": 1}]
    pgf = PlacementGroupFactory(given)
    given[0]["CPU"] = 7
    assert pgf.bundles == [{"CPU": 1.0}]


def test_equal_factories_are_equal_and_hash_alike():
    a = make_pgf({"CPU": 1, "GPU": 1}, {"CPU": 2})
    b = make_pgf({"GPU": 1.0, "CPU": 1.0}, {"CPU": 2.0})  # other key order, floats
    assert a == b
    assert hash(a) == hash(b)
    assert {a: "x"}[b] == "x"
    assert len({a, b}) == 1


@pytest.mark.parametrize(
    "other",
    [
        PlacementGroupFactory([{"CPU": 1}], "SPREAD"),
        PlacementGroupFactory([{}, {"CPU": 1}]),
        PlacementGroupFactory([{"CPU": 2}]),
        PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]),
        PlacementGroupFactory([{"CPU": 1}], "PACK", name="pg"),
    ],
)
def test_factories_that_differ_are_not_equal(other):
    assert PlacementGroupFactory([{"CPU": 1}]) != other


def test_comparison_with_other_types_is_false():
    pgf = make_pgf({"CPU": 1})
    assert pgf != {"CPU": 1}
    assert pgf != [{"CPU": 1.0}]
    assert pgf.__eq__(3) is NotImplemented


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_pickle_round_trip_keeps_equality_and_hash(dumps):
    pgf = PlacementGroupFactory([{}, {"CPU": 2, "GPU": 0.5}], "STRICT_PACK", name="trial_pg")
    back = pickle.loads(dumps(pgf))
    assert back == pgf
    assert hash(back) == hash(pgf)
    assert back.head_bundle_is_empty is True
    assert back.placement_group_args == ((), {"name": "trial_pg"})


def test_repr_rebuilds_an_equal_factory():
    for pgf in (
        make_pgf({"CPU": 1, "GPU": 0.5}),
        PlacementGroupFactory([{}, {"CPU": 2}], "SPREAD", name="x"),
    ):
        text = repr(pgf)
        assert text.startswith("PlacementGroupFactory([")
        assert eval(text, {"PlacementGroupFactory": PlacementGroupFactory}) == pgf


def test_json_round_trip():
    pgf = PlacementGroupFactory([{}, {"CPU": 2}, {"GPU": 1}], "STRICT_SPREAD", name="x")
    data = json.loads(json.dumps(pgf.to_json()))
    assert data["bundles"][0] == {}
    assert PlacementGroupFactory.from_json(data) == pgf


# --- resource_dict_to_pg_factory -----------------------------------------------------


@pytest.mark.parametrize("spec", [None, {}])
def test_nothing_asked_means_one_cpu(spec):
    pgf = resource_dict_to_pg_factory(spec)
    assert pgf.bundles == [{"CPU": 1.0}]
    assert pgf.head_cpus == 1.0


def test_gpu_only_dict_asks_for_no_cpu_like_ray():
    # Ray fills in one CPU only when the dict is empty; a dict naming other resources
    # but no CPU asks for zero CPUs.
    pgf = resource_dict_to_pg_factory({"gpu": 1})
    assert pgf.required_resources == {"GPU": 1.0}
    assert pgf.head_cpus == 0.0


@pytest.mark.parametrize("spec", [{"cpu": 2, "gpu": 0.5}, {"CPU": 2, "GPU": 0.5}])
def test_cpu_and_gpu_in_either_case(spec):
    assert resource_dict_to_pg_factory(spec).bundles == [{"CPU": 2.0, "GPU": 0.5}]


def test_memory_and_custom_resources():
    pgf = resource_dict_to_pg_factory(
        {"cpu": 1, "memory": 2e9, "custom_resources": {"tpu": 4}, "accel": 1}
    )
    assert pgf.required_resources == {"CPU": 1.0, "memory": 2e9, "tpu": 4.0, "accel": 1.0}


def test_unknown_keys_are_custom_resources():
    assert resource_dict_to_pg_factory({"cpu": 1, "special_hw": 2}).required_resources == {
        "CPU": 1.0,
        "special_hw": 2.0,
    }


def test_given_dict_is_not_modified():
    spec = {"cpu": 1, "custom_resources": {"a": 1}}
    resource_dict_to_pg_factory(spec)
    assert spec == {"cpu": 1, "custom_resources": {"a": 1}}


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ({"gpu": -1}, r"resources: the amount of 'gpu' must be a finite number >= 0"),
        ({"cpu": -0.5}, r"resources: the amount of 'cpu'"),
        ({"cpu": "two"}, "must be a number"),
        ({"cpu": 1, "custom_resources": {"a": -1}}, "'a'"),
        ({"cpu": 1, "custom_resources": [("a", 1)]}, "'custom_resources' must be a dict"),
        ({"cpu": 1, "CPU": 2}, "both 'cpu'"),
        ({"cpu": 1, "custom_resources": {"a": 1}, "a": 2}, "both in 'custom_resources'"),
        ({"cpu": 1, "extra_cpu": 2}, "'extra_cpu' is no longer supported"),
        ({"cpu": 0}, "asks for no resources at all"),
    ],
)
def test_bad_resource_dicts_are_rejected(spec, pattern):
    with pytest.raises(ValueError, match=pattern):
        resource_dict_to_pg_factory(spec)


def test_same_cpu_under_both_spellings_is_accepted():
    assert resource_dict_to_pg_factory({"cpu": 2, "CPU": 2}).bundles == [{"CPU": 2.0}]


def test_non_dict_spec_is_a_type_error():
    with pytest.raises(TypeError, match="resources must be a dict"):
        resource_dict_to_pg_factory([("cpu", 1)])  # type: ignore[arg-type]


# --- normalize_resources ---------------------------------------------------------------


class _ScalingConfigLike:
    """A stand-in for third-party configs that know how to become a factory."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def as_placement_group_factory(self) -> PlacementGroupFactory:
        return PlacementGroupFactory([{"CPU": 1}] + [{"CPU": 1}] * self.workers)


def test_normalize_resources_accepts_none_dict_and_factory():
    pgf = make_pgf({"CPU": 3})
    assert normalize_resources(pgf) is pgf
    assert normalize_resources(None) == PlacementGroupFactory([{"CPU": 1}])
    assert normalize_resources({"gpu": 1}) == PlacementGroupFactory([{"GPU": 1}])


def test_normalize_resources_uses_as_placement_group_factory():
    assert normalize_resources(_ScalingConfigLike(2)).required_resources == {"CPU": 3.0}


@pytest.mark.parametrize("value", [3, "cpu", [{"CPU": 1}]])
def test_normalize_resources_rejects_other_types(value):
    with pytest.raises(TypeError, match="resources must be None, a dict"):
        normalize_resources(value)
