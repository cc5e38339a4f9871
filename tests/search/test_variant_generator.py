"""Tests for fasttune.search.variant_generator: expanding a search space into configs."""

from __future__ import annotations

import copy
import itertools
import logging

import numpy as np
import pytest

from fasttune.search.sample import (
    Categorical,
    Float,
    choice,
    grid_search,
    loguniform,
    qrandint,
    randint,
    sample_from,
    uniform,
)
from fasttune.search.variant_generator import (
    RecursiveDependencyError,
    assign_value,
    count_spec_samples,
    count_variants,
    expand_param_space,
    flatten_resolved_vars,
    format_vars,
    generate_variants,
    get_preset_variants,
    parse_spec_vars,
    resolve_nested_dict,
)


def configs(space, **kwargs):
    return [config for _, config in generate_variants(space, **kwargs)]


def expanded(space, num_samples=1, **kwargs):
    return [config for _, config in expand_param_space(space, num_samples, **kwargs)]


# --- grid search ---------------------------------------------------------------------


def test_grid_is_a_cartesian_product_with_the_first_sorted_path_fastest():
    space = {"b": grid_search([1, 2]), "a": grid_search(["x", "y", "z"])}
    result = [(c["a"], c["b"]) for c in configs(space)]
    assert result == [("x", 1), ("y", 1), ("z", 1), ("x", 2), ("y", 2), ("z", 2)]


def test_grid_order_follows_paths_not_insertion_order():
    space = {"z": grid_search([1, 2]), "m": {"b": grid_search([3, 4])}, "a": 0}
    assert [(c["m"]["b"], c["z"]) for c in configs(space)] == [(3, 1), (4, 1), (3, 2), (4, 2)]


def test_grid_in_nested_dicts_and_lists():
    space = {"opt": {"lr": grid_search([0.1, 0.01])}, "layers": [grid_search([8, 16]), 4]}
    result = configs(space)
    assert len(result) == 4
    assert result[0] == {"opt": {"lr": 0.1}, "layers": [8, 4]}
    assert {(c["opt"]["lr"], c["layers"][0]) for c in result} == set(
        itertools.product([0.1, 0.01], [8, 16])
    )


def test_grid_accepts_a_grid_categorical_domain():
    assert configs({"a": Categorical([1, 2]).grid()}) == [{"a": 1}, {"a": 2}]


def test_resolved_vars_map_paths_to_chosen_values():
    space = {"a": {"b": grid_search([1, 2])}, "l": [0, uniform(0, 1)], "c": 5}
    resolved_vars, config = next(generate_variants(space, random_state=0))
    assert set(resolved_vars) == {("a", "b"), ("l", 1)}
    assert resolved_vars[("a", "b")] == 1
    assert resolved_vars[("l", 1)] == config["l"][1]


def test_variants_do_not_share_mutable_grid_values():
    result = configs({"a": grid_search([[1], [2]]), "b": grid_search([0, 1])})
    first, second = result[0], result[2]
    assert first["a"] == second["a"] == [1]
    first["a"].append(99)
    assert second["a"] == [1]


def test_grid_values_may_contain_domains():
    space = {"opt": grid_search([{"lr": uniform(0, 1)}, {"lr": 5}])}
    first, second = configs(space, random_state=0)
    assert 0 <= first["opt"]["lr"] < 1 and type(first["opt"]["lr"]) is float
    assert second == {"opt": {"lr": 5}}


def test_sample_from_can_read_a_domain_revealed_by_a_grid_value():
    space = {
        "opt": grid_search([{"lr": uniform(0, 1)}]),
        "double": sample_from(lambda config: config["opt"]["lr"] * 2),
    }
    (config,) = configs(space, random_state=0)
    assert config["double"] == config["opt"]["lr"] * 2


# --- random domains -------------------------------------------------------------------


def test_random_values_are_sampled_per_grid_variant():
    space = {"g": grid_search(list(range(20))), "x": uniform(0, 1)}
    values = [c["x"] for c in configs(space, random_state=0)]
    assert len(set(values)) == 20


def test_constant_grid_search_reuses_random_values():
    space = {"g": grid_search(list(range(5))), "x": uniform(0, 1), "n": {"k": randint(0, 10**6)}}
    result = configs(space, constant_grid_search=True, random_state=0)
    assert len({c["x"] for c in result}) == 1
    assert len({c["n"]["k"] for c in result}) == 1
    assert [c["g"] for c in result] == list(range(5))


def test_nested_dicts_lists_and_tuples_are_resolved():
    space = {
        "model": {"layers": [randint(1, 4), {"units": choice([32, 64])}], "act": "relu"},
        "pair": (uniform(0, 1), 7),
    }
    config = configs(space, random_state=1)[0]
    assert config["model"]["layers"][0] in (1, 2, 3)
    assert config["model"]["layers"][1]["units"] in (32, 64)
    assert config["model"]["act"] == "relu"
    assert type(config["pair"]) is tuple and config["pair"][1] == 7
    assert 0 <= config["pair"][0] < 1


def test_spec_without_variables_yields_one_copy():
    space = {"a": 1, "b": [1, 2]}
    ((resolved_vars, config),) = list(generate_variants(space))
    assert resolved_vars == {} and config == space and config is not space
    assert config["b"] is not space["b"]


def test_generate_variants_needs_a_dict():
    with pytest.raises(TypeError, match="must be a dict"):
        list(generate_variants([uniform(0, 1)]))


# --- sample_from -----------------------------------------------------------------------


def test_sample_from_reads_other_values_in_spec_style():
    space = {"a": grid_search([1, 2]), "b": sample_from(lambda spec: spec.config.a * 10)}
    assert [c["b"] for c in expanded(space)] == [10, 20]


def test_sample_from_reads_other_values_in_config_style():
    space = {"a": randint(1, 5), "b": sample_from(lambda config: config["a"] + 100)}
    for config in expanded(space, num_samples=5, seed=0):
        assert config["b"] == config["a"] + 100


def test_sample_from_with_a_full_experiment_spec():
    spec = {"config": {"a": 3, "b": sample_from(lambda spec: spec.config.a * 2)}}
    ((resolved_vars, resolved),) = list(generate_variants(spec))
    assert resolved == {"config": {"a": 3, "b": 6}}
    assert resolved_vars == {("config", "b"): 6}


def test_sample_from_chains_resolve_in_any_order():
    space = {
        "d": sample_from(lambda spec: spec.config.c + 1),
        "c": sample_from(lambda config: config["b"] * 2),
        "b": sample_from(lambda spec: spec.config.nested.a + 1),
        "nested": {"a": randint(10, 20)},
    }
    for config in expanded(space, num_samples=3, seed=0):
        a = config["nested"]["a"]
        assert (config["b"], config["c"], config["d"]) == (a + 1, 2 * (a + 1), 2 * (a + 1) + 1)


def test_sample_from_can_read_list_items_once_resolved():
    space = {
        "layers": [sample_from(lambda config: config["layers"][1] * 2), 3],
        "total": sample_from(lambda config: sum(config["layers"])),
    }
    assert configs(space) == [{"layers": [6, 3], "total": 9}]


def test_sample_from_result_is_a_plain_copy():
    space = {"sub": {"x": 1}, "copy": sample_from(lambda config: config["sub"])}
    (config,) = configs(space)
    assert type(config["copy"]) is dict and config["copy"] == {"x": 1}
    config["copy"]["x"] = 2
    assert config["sub"]["x"] == 1


def test_sample_from_may_return_a_domain_that_others_read():
    space = {
        "reader": sample_from(lambda config: config["maker"] + 1),
        "maker": sample_from(lambda: randint(10, 20)),
    }
    for config in configs(space, random_state=0):
        assert 10 <= config["maker"] < 20 and config["reader"] == config["maker"] + 1


def test_sample_from_without_arguments():
    (config,) = configs({"a": sample_from(lambda: 42)})
    assert config == {"a": 42}


def test_circular_dependency_raises_instead_of_looping():
    space = {
        "x": sample_from(lambda config: config["y"] + 1),
        "y": sample_from(lambda spec: spec.config.x + 1),
        "z": uniform(0, 1),
        "g": grid_search([1, 2]),
    }
    with pytest.raises(RecursiveDependencyError, match=r"Circular dependency.*`x`.*`y`"):
        list(generate_variants(space))


def test_self_dependency_raises():
    with pytest.raises(RecursiveDependencyError, match="`a` is not resolved yet"):
        list(generate_variants({"a": sample_from(lambda config: config["a"])}))


def test_circular_dependency_is_a_value_error():
    assert issubclass(RecursiveDependencyError, ValueError)


def test_failing_function_names_the_path():
    def broken(config):
        return 1 / 0

    with pytest.raises(ValueError, match=r"Could not sample `a/0`.*ZeroDivisionError") as info:
        list(generate_variants({"a": [sample_from(broken)]}))
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_missing_key_in_function_names_the_path():
    with pytest.raises(ValueError, match=r"Could not sample `b`.*KeyError"):
        list(generate_variants({"b": sample_from(lambda config: config["nope"])}))


# --- seeding ---------------------------------------------------------------------------

SEEDED_SPACE = {
    "g": grid_search([1, 2, 3]),
    "lr": loguniform(1e-5, 1e-1),
    "n": qrandint(0, 100, 5),
    "act": choice(["relu", "tanh", "gelu"]),
    "deep": {"x": [uniform(-1, 1)]},
}


def test_same_seed_gives_same_configs():
    assert configs(SEEDED_SPACE, random_state=5) == configs(SEEDED_SPACE, random_state=5)
    assert expanded(SEEDED_SPACE, 4, seed=5) == expanded(SEEDED_SPACE, 4, seed=5)


def test_different_seeds_give_different_configs():
    assert expanded(SEEDED_SPACE, 4, seed=5) != expanded(SEEDED_SPACE, 4, seed=6)


def test_seed_is_one_stream_across_variants():
    values = [c["lr"] for c in expanded(SEEDED_SPACE, 4, seed=5)]
    assert len(set(values)) == len(values) == 12


def test_numpy_generators_are_accepted_as_seed():
    assert expanded(SEEDED_SPACE, 2, seed=np.random.default_rng(3)) == expanded(
        SEEDED_SPACE, 2, seed=np.random.default_rng(3)
    )
    assert expanded(SEEDED_SPACE, 2, seed=np.random.RandomState(3)) == expanded(
        SEEDED_SPACE, 2, seed=np.random.RandomState(3)
    )


# --- experiment tags ---------------------------------------------------------------------


def test_format_vars_matches_rays_tag_format():
    resolved = {("b",): 0.13, ("a",): 2, ("opt", "name"): "adam w/ decay", ("z",): True}
    assert format_vars(resolved) == "a=2,b=0.1300,name=adam_w_decay,z=True"


def test_format_vars_uses_last_path_element_and_sorts_by_path():
    resolved = {("config", "z", "lr"): 1e-5, ("config", "a", "units"): 64, ("l", 0): -0.5}
    assert format_vars(resolved) == "units=64,lr=0.0000,0=-0.5000"


def test_format_vars_strips_invalid_characters():
    assert format_vars({("a",): "  [1, 2] "}) == "a=1_2"
    assert format_vars({}) == ""


def test_expand_param_space_yields_tags():
    tags = [tag for tag, _ in expand_param_space({"a": grid_search([1, 2]), "b": 0.5})]
    assert tags == ["a=1", "a=2"]
    tag, config = next(expand_param_space({"lr": uniform(0, 1)}, seed=0))
    assert tag == f"lr={config['lr']:.4f}"
    assert list(expand_param_space({"fixed": 1})) == [("", {"fixed": 1})]


def test_flatten_and_resolve_nested_dict():
    assert flatten_resolved_vars({("config", "a", "b"): 1, ("c", 0): 2}) == {"a/b": 1, "c/0": 2}
    nested = {"a": {"b": 1, "c": {"d": 2}}, "e": [1]}
    assert resolve_nested_dict(nested) == {("a", "b"): 1, ("a", "c", "d"): 2, ("e",): [1]}
    assert format_vars(resolve_nested_dict({"x": {"y": 0.5}})) == "y=0.5000"


# --- num_samples and counting -------------------------------------------------------------


def test_num_samples_repeats_the_whole_grid():
    space = {"a": grid_search([1, 2, 3]), "b": grid_search(["x", "y"]), "r": uniform(0, 1)}
    result = expanded(space, num_samples=4, seed=0)
    assert len(result) == 24
    grid_pass = [(c["a"], c["b"]) for c in result[:6]]
    assert [(c["a"], c["b"]) for c in result] == grid_pass * 4
    assert len({c["r"] for c in result}) == 24


def test_num_samples_edge_values():
    assert expanded({"a": uniform(0, 1)}, num_samples=0) == []
    endless = expand_param_space({"a": grid_search([1, 2])}, num_samples=-1)
    assert [c["a"] for _, c in itertools.islice(endless, 7)] == [1, 2, 1, 2, 1, 2, 1]
    with pytest.raises(ValueError, match=r"`num_samples` must be >= 0, or -1.*got -2"):
        expanded({}, num_samples=-2)
    with pytest.raises(TypeError, match="`num_samples` must be an int"):
        expanded({}, num_samples=2.0)


def test_empty_or_missing_param_space_gives_one_empty_config():
    assert expanded(None) == [{}]
    assert expanded({}, num_samples=3) == [{}, {}, {}]
    with pytest.raises(TypeError, match="`param_space` must be a dict"):
        expanded([1, 2])


def test_count_spec_samples_and_count_variants():
    space = {"a": grid_search([1, 2]), "b": {"c": grid_search([1, 2, 3])}, "r": uniform(0, 1)}
    assert count_spec_samples(space) == 6
    assert count_spec_samples(space, num_samples=3) == 18
    assert count_variants({"config": space, "num_samples": 2}) == 12
    assert count_variants({"config": space}) == len(expanded(space))


# --- points_to_evaluate -------------------------------------------------------------------


def test_points_to_evaluate_follow_rays_documented_example():
    space = {"a": grid_search([1, 2]), "b": randint(0, 3)}
    points = [{"a": 2, "b": 2}, {"a": 1}, {"b": 2}]
    result = expanded(space, num_samples=4, seed=0, points_to_evaluate=points)
    assert len(result) == 6 == count_variants({"config": space, "num_samples": 4}, points)
    assert result[0] == {"a": 2, "b": 2}
    assert result[1]["a"] == 1 and result[1]["b"] in (0, 1, 2)
    assert result[2:4] == [{"a": 1, "b": 2}, {"a": 2, "b": 2}]
    assert [c["a"] for c in result[4:]] == [1, 2]


def test_more_points_than_samples_are_all_evaluated():
    points = [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}]
    assert expanded({"x": uniform(0, 1)}, num_samples=2, points_to_evaluate=points) == points


def test_point_with_nested_values():
    space = {"opt": {"lr": loguniform(1e-4, 1), "name": "sgd"}, "layers": [randint(1, 4), 8]}
    point = {"opt": {"lr": 0.5}, "layers": [2, 8]}
    (config,) = expanded(space, num_samples=1, points_to_evaluate=[point])
    assert config == {"opt": {"lr": 0.5, "name": "sgd"}, "layers": [2, 8]}


def test_point_may_replace_a_whole_domain_of_dicts():
    space = {"opt": choice([{"lr": 1}, {"lr": 2}])}
    (config,) = expanded(space, points_to_evaluate=[{"opt": {"lr": 2}}])
    assert config == {"opt": {"lr": 2}}


def test_point_with_unknown_key_is_rejected():
    with pytest.raises(ValueError, match=r"key `nope` is not in the search space"):
        expanded({"a": uniform(0, 1)}, points_to_evaluate=[{"nope": 1}])
    with pytest.raises(TypeError, match="each point must be a dict"):
        expanded({"a": uniform(0, 1)}, points_to_evaluate=[[1]])


def test_point_outside_its_domain_is_used_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="fasttune.search.variant_generator")
    space = {"a": uniform(0, 1), "b": grid_search([1, 2]), "c": 3}
    (config,) = expanded(space, points_to_evaluate=[{"a": 5.0, "b": 7, "c": 4}])
    assert config == {"a": 5.0, "b": 7, "c": 4}
    messages = [record.getMessage() for record in caplog.records]
    assert any("`a`" in m and "(0, 1)" in m for m in messages)
    assert any("`b`" in m for m in messages) and any("`c`" in m for m in messages)


def test_get_preset_variants_uses_the_config_key():
    spec = {"config": {"a": grid_search([1, 2]), "b": uniform(0, 1)}}
    result = [s for _, s in get_preset_variants(spec, {"b": 0.5})]
    assert result == [{"config": {"a": 1, "b": 0.5}}, {"config": {"a": 2, "b": 0.5}}]


# --- spec helpers -----------------------------------------------------------------------------


def test_parse_spec_vars_splits_and_sorts():
    space = {"c": grid_search([1]), "a": grid_search([2, 3]), "x": [1, uniform(0, 1)], "y": 2}
    resolved, domains, grids = parse_spec_vars(space)
    assert resolved == [(("x", 0), 1), (("y",), 2)]
    assert [path for path, _ in domains] == [("x", 1)]
    assert isinstance(domains[0][1], Float)
    assert [path for path, _ in grids] == [("a",), ("c",)]
    assert all(domain.is_grid() for _, domain in grids)


def test_assign_value_handles_dicts_lists_and_tuples():
    spec = {"a": {"b": [0, (1, (2, 3))]}}
    assign_value(spec, ("a", "b", 0), "x")
    assign_value(spec, ("a", "b", 1, 1, 0), "y")
    assert spec == {"a": {"b": ["x", (1, ("y", 3))]}}
    with pytest.raises(ValueError, match="tuple"):
        assign_value((1, 2), (0,), 5)


# --- the input is never changed ------------------------------------------------------------


def test_input_space_and_points_are_not_mutated():
    domain = uniform(0, 1)
    space = {
        "a": grid_search([[1], [2]]),
        "b": domain,
        "c": {"d": [randint(0, 3), sample_from(lambda config: config["b"])]},
        "t": (choice([1, 2]),),
    }
    grid_values = space["a"]["grid_search"]
    points = [{"b": 0.5}]
    before = copy.deepcopy((space, points))
    result = expanded(space, 3, seed=0, points_to_evaluate=points)
    assert len(result) == 6
    assert repr((space, points)) == repr(before)
    assert space["b"] is domain and space["a"]["grid_search"] is grid_values
    result[0]["a"].append(3)
    assert grid_values == [[1], [2]]


def test_each_variant_gets_its_own_copy_of_every_value_but_the_domains():
    # The domains are shared with the spec (only read, then replaced by values); the
    # rest is copied per variant, as Ray deep-copies the spec.
    nested = {"sizes": [1, 2], "opt": {"m": 0.9}}
    x = uniform(0, 1)
    spec = {"x": x, "nested": nested, "g": grid_search([[1], [2]])}
    variants = [config for _, config in generate_variants(spec, random_state=3)]
    assert len(variants) == 2
    first, second = variants
    assert first["nested"] == nested and first["nested"] is not nested
    assert first["nested"]["sizes"] is not second["nested"]["sizes"]
    first["nested"]["sizes"].append(3)
    assert nested["sizes"] == [1, 2] and second["nested"]["sizes"] == [1, 2]
    assert first["g"] == [1] and second["g"] == [2] and first["g"] is not spec["g"]
    assert spec["x"] is x and all(0 <= v["x"] < 1 for v in variants)
