"""Tests for BasicVariantGenerator: lazy expansion, concurrency limit, exact resume."""

from __future__ import annotations

import json
import pickle

import cloudpickle
import numpy as np
import pytest

from fasttune.search import BasicVariantGenerator, Suggestion
from fasttune.search.sample import choice, grid_search, randint, sample_from, uniform
from fasttune.search.variant_generator import expand_param_space

SPACE = {
    "a": grid_search([1, 2, 3]),
    "lr": uniform(0.0, 1.0),
    "opt": {"name": choice(["adam", "sgd"]), "momentum": 0.9},
}


def make_gen(space=SPACE, num_samples=2, **kwargs):
    kwargs.setdefault("random_state", 7)
    gen = BasicVariantGenerator(**kwargs)
    gen.add_configurations(space, num_samples)
    return gen


def drain(gen, limit=10_000, prefix="t"):
    out = []
    for index in range(limit):
        suggestion = gen.next_suggestion(f"{prefix}{index}")
        if suggestion is None:
            break
        out.append(suggestion)
    return out


def as_pairs(suggestions):
    return [(s.tag, s.config) for s in suggestions]


def resumed(gen, new_kwargs=None):
    """Round-trip the state through cloudpickle into a fresh generator."""
    blob = cloudpickle.dumps(gen.get_state())
    fresh = BasicVariantGenerator(**(new_kwargs or {}))
    fresh.set_state(pickle.loads(blob))
    return fresh


def test_sequence_matches_expand_param_space():
    points = [{"a": 2, "lr": 0.5}, {"opt": {"name": "sgd"}}]
    gen = make_gen(num_samples=3, points_to_evaluate=points)
    expected = list(expand_param_space(SPACE, 3, seed=7, points_to_evaluate=points))
    assert as_pairs(drain(gen)) == expected
    assert gen.total_samples == len(expected)


def test_points_to_evaluate_come_first():
    gen = make_gen(num_samples=2, points_to_evaluate=[{"a": 3, "lr": 0.25, "opt": {"name": "x"}}])
    first = gen.next_suggestion("t0")
    assert first.config == {"a": 3, "lr": 0.25, "opt": {"name": "x", "momentum": 0.9}}
    assert first.tag == ""  # nothing left to sample in that pass
    # The point took one of the two passes: one more full grid follows.
    assert len(drain(gen)) == 3


def test_suggestion_fields():
    gen = make_gen(num_samples=1)
    suggestion = gen.next_suggestion("t0")
    assert isinstance(suggestion, Suggestion)
    assert set(suggestion.evaluated_params) == {"a", "lr", "opt/name"}
    assert suggestion.evaluated_params["a"] == 1
    assert suggestion.tag.startswith("a=1,lr=")
    assert f"name={suggestion.config['opt']['name']}" in suggestion.tag
    with pytest.raises(AttributeError):
        suggestion.tag = "x"  # frozen


def test_finished_right_after_last_suggestion():
    gen = make_gen(num_samples=2)
    assert gen.total_samples == 6
    suggestions = [gen.next_suggestion(f"t{i}") for i in range(6)]
    assert all(s is not None for s in suggestions)
    assert gen.is_finished()
    assert gen.next_suggestion("t6") is None


def test_zero_samples_is_finished_at_once():
    gen = make_gen(num_samples=0)
    assert gen.total_samples == 0
    assert gen.is_finished()
    assert gen.next_suggestion("t0") is None


def test_nested_grid_beyond_the_count_is_not_lost():
    space = {"a": grid_search([{"b": grid_search([1, 2])}, 3])}
    gen = make_gen(space, num_samples=1)
    assert as_pairs(drain(gen)) == list(expand_param_space(space, 1, seed=7))
    assert gen.is_finished()


def test_infinite_samples():
    gen = make_gen({"x": randint(0, 1000)}, num_samples=-1)
    assert gen.total_samples == -1
    suggestions = drain(gen, limit=300)
    assert len(suggestions) == 300
    assert not gen.is_finished()
    assert len({s.config["x"] for s in suggestions}) > 100


def test_max_concurrent_holds_back_until_a_trial_completes():
    gen = make_gen(num_samples=2, max_concurrent=2)
    assert gen.next_suggestion("t0") is not None
    assert gen.next_suggestion("t1") is not None
    assert gen.next_suggestion("t2") is None
    assert not gen.is_finished()
    gen.on_trial_complete("unknown")
    assert gen.next_suggestion("t2") is None
    gen.on_trial_complete("t0", {"loss": 1.0})
    assert gen.next_suggestion("t2") is not None
    assert gen.next_suggestion("t3") is None


def test_max_concurrent_does_not_change_the_sequence():
    limited = make_gen(num_samples=2, max_concurrent=1)
    got = []
    for index in range(6):
        got.append(limited.next_suggestion(f"t{index}"))
        limited.on_trial_complete(f"t{index}")
    assert as_pairs(got) == as_pairs(drain(make_gen(num_samples=2)))


@pytest.mark.parametrize("constant_grid_search", [False, True])
def test_resume_at_every_point_equals_uninterrupted_run(constant_grid_search):
    points = [{"a": 1}]
    kwargs = {"points_to_evaluate": points, "constant_grid_search": constant_grid_search}
    expected = as_pairs(drain(make_gen(num_samples=3, **kwargs)))
    assert len(expected) == 7  # the point fixes `a`: 1 + 2 passes x 3
    for cut in range(len(expected) + 1):
        gen = make_gen(num_samples=3, **kwargs)
        head = [gen.next_suggestion(f"t{i}") for i in range(cut)]
        rest = drain(resumed(gen), prefix="r")
        assert as_pairs(head + rest) == expected, f"cut after {cut}"


def test_resume_of_infinite_run_across_passes():
    space = {"a": grid_search([1, 2]), "x": uniform(0, 1)}
    expected = as_pairs(drain(make_gen(space, num_samples=-1), limit=40))
    gen = make_gen(space, num_samples=-1)
    head = drain(gen, limit=13)
    gen = resumed(gen)
    middle = drain(gen, limit=14, prefix="m")
    tail = drain(resumed(gen), limit=13, prefix="r")
    assert as_pairs(head + middle + tail) == expected


def test_resume_keeps_functions_and_live_trials():
    space = {"x": randint(0, 100), "y": sample_from(lambda spec: spec.config.x * 2)}
    gen = make_gen(space, num_samples=5, max_concurrent=2)
    first = [gen.next_suggestion("t0"), gen.next_suggestion("t1")]
    assert all(s.config["y"] == 2 * s.config["x"] for s in first)
    restored = resumed(gen, {"max_concurrent": 2})
    assert restored.next_suggestion("t2") is None  # both slots still taken
    restored.on_trial_complete("t1")
    third = restored.next_suggestion("t2")
    assert third.config["y"] == 2 * third.config["x"]
    assert restored.total_samples == 5


def test_resume_before_any_suggestion():
    gen = make_gen(num_samples=2)
    assert as_pairs(drain(resumed(gen))) == as_pairs(drain(make_gen(num_samples=2)))


def test_state_after_finish_stays_finished():
    gen = make_gen(num_samples=1)
    drain(gen)
    restored = resumed(gen)
    assert restored.is_finished()
    assert restored.next_suggestion("x") is None


def test_save_to_dir_and_restore_from_dir(tmp_path):
    gen = make_gen(num_samples=2)
    head = [gen.next_suggestion("t0"), gen.next_suggestion("t1")]
    assert not gen.has_checkpoint(str(tmp_path))
    gen.save_to_dir(str(tmp_path), "s1")
    assert gen.has_checkpoint(str(tmp_path))
    assert (tmp_path / "basic-variant-state-s1.pkl").exists()
    restored = BasicVariantGenerator()
    restored.restore_from_dir(str(tmp_path))
    assert as_pairs(head + drain(restored)) == as_pairs(drain(make_gen(num_samples=2)))


def test_restore_from_empty_dir_raises(tmp_path):
    with pytest.raises(RuntimeError, match="basic-variant-state"):
        BasicVariantGenerator().restore_from_dir(str(tmp_path))


def test_seeded_runs_repeat_and_differ_by_seed():
    def run(seed):
        return as_pairs(drain(make_gen(num_samples=2, random_state=seed)))

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_generator_random_state_is_accepted():
    gen = make_gen(num_samples=1, random_state=np.random.default_rng(3))
    assert as_pairs(drain(gen)) == list(expand_param_space(SPACE, 1, seed=3))


def test_global_numpy_seed_makes_default_runs_repeatable():
    np.random.seed(11)
    first = as_pairs(drain(make_gen(num_samples=2, random_state=None)))
    np.random.seed(11)
    second = as_pairs(drain(make_gen(num_samples=2, random_state=None)))
    third = as_pairs(drain(make_gen(num_samples=2, random_state=None)))
    assert first == second
    assert first != third


def test_a_python_random_generator_resumes_exactly_and_repeats_by_seed():
    """With numpy not imported, the generator is a ``random.Random``; its state is
    kept per pass like a numpy one's, so a resume anywhere continues the same run."""
    import random

    full = as_pairs(drain(make_gen(num_samples=3, random_state=random.Random(5))))
    assert full == as_pairs(drain(make_gen(num_samples=3, random_state=random.Random(5))))
    assert full != as_pairs(drain(make_gen(num_samples=3, random_state=random.Random(6))))
    for cut in range(len(full)):
        gen = make_gen(num_samples=3, random_state=random.Random(5))
        head = as_pairs(drain(gen, limit=cut))
        resumed = BasicVariantGenerator()
        resumed.set_state(pickle.loads(pickle.dumps(gen.get_state())))
        assert head + as_pairs(drain(resumed, prefix="r")) == full


def test_param_space_is_not_changed():
    space = {"a": grid_search([1, 2]), "b": {"c": uniform(0, 1)}}
    before = repr(space)
    drain(make_gen(space, num_samples=2))
    assert repr(space) == before


def test_set_search_properties():
    gen = BasicVariantGenerator()
    assert gen.set_search_properties("loss", "min", {}) is True
    assert (gen.metric, gen.mode) == ("loss", "min")
    assert gen.set_search_properties("acc", None, {}) is False
    with pytest.raises(ValueError, match="`mode`"):
        BasicVariantGenerator().set_search_properties("loss", "lowest", {})


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"points_to_evaluate": {"a": 1}}, TypeError, "points_to_evaluate"),
        ({"points_to_evaluate": [{"a": 1}, 3]}, TypeError, r"points_to_evaluate\[1\]"),
        ({"max_concurrent": -1}, ValueError, "max_concurrent"),
        ({"max_concurrent": 1.5}, TypeError, "max_concurrent"),
        ({"random_state": "seed"}, TypeError, "random_state"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        BasicVariantGenerator(**kwargs)


def test_bad_configuration_arguments():
    with pytest.raises(TypeError, match="param_space"):
        BasicVariantGenerator().add_configurations([1, 2], 1)
    with pytest.raises(ValueError, match="num_samples"):
        BasicVariantGenerator().add_configurations({}, -2)
    with pytest.raises(ValueError, match="`b` is not in the search space"):
        BasicVariantGenerator(points_to_evaluate=[{"b": 1}]).add_configurations({"a": 1}, 1)


def test_call_order_errors():
    gen = BasicVariantGenerator()
    with pytest.raises(RuntimeError, match="add_configurations"):
        gen.next_suggestion("t0")
    gen.add_configurations({}, 1)
    with pytest.raises(RuntimeError, match="already called"):
        gen.add_configurations({}, 1)
    with pytest.raises(ValueError, match=r"BasicVariantGenerator\.get_state"):
        BasicVariantGenerator().set_state({"counter": 1})


def test_constant_space_gives_one_config_per_sample():
    gen = make_gen({"x": 1}, num_samples=3)
    suggestions = drain(gen)
    assert [s.config for s in suggestions] == [{"x": 1}] * 3
    assert {s.tag for s in suggestions} == {""}


def test_a_grid_of_constants_never_imports_numpy(tmp_path):
    """numpy costs the start of a run a tenth of a second; a space with nothing to
    sample does not need it (a space with a random domain still draws from numpy)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import sys
        import fasttune as tune

        def f(config):
            tune.report({{"a": config["x"]}})

        grid = tune.Tuner(
            f,
            param_space={{"x": tune.grid_search([1, 2]), "y": {{"z": 3}}}},
            run_config=tune.RunConfig(storage_path={str(tmp_path)!r}, verbose=0),
        ).fit()
        assert sorted(r.metrics["a"] for r in grid) == [1, 2]
        print("numpy" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    sampled, constant = BasicVariantGenerator(), BasicVariantGenerator()
    sampled.add_configurations({"x": uniform(0, 1)}, num_samples=2)
    constant.add_configurations({"x": grid_search([1, 2])}, num_samples=2)
    assert isinstance(sampled._rng, np.random.Generator) and constant._rng is None


def test_sampling_without_numpy_draws_from_python_random(tmp_path):
    """A user who has not imported numpy cannot have seeded it: every kind of domain
    then draws from Python's ``random`` (numpy stays unimported, ~0.1 s saved), and
    ``random.seed`` repeats the run's configs."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import json, random, sys
        import fasttune as tune

        space = {{
            "u": tune.uniform(-1, 1), "q": tune.quniform(0, 1, 0.1),
            "lu": tune.loguniform(1e-4, 1e-1), "qlu": tune.qloguniform(1e-3, 1, 1e-3),
            "n": tune.randn(0, 1), "qn": tune.qrandn(0, 1, 0.5),
            "i": tune.randint(0, 10), "qi": tune.qrandint(0, 20, 5),
            "li": tune.lograndint(1, 100), "qli": tune.qlograndint(2, 64, 2),
            "c": tune.choice(["a", "b", "c"]), "g": tune.grid_search([1, 2]),
        }}

        def f(config):
            tune.report(dict(config))

        def run(name):
            grid = tune.Tuner(
                f, param_space=space, tune_config=tune.TuneConfig(num_samples=3),
                run_config=tune.RunConfig(name=name, storage_path={str(tmp_path)!r}, verbose=0),
            ).fit()
            assert not grid.errors
            return sorted(json.dumps({{k: r.config[k] for k in space}}) for r in grid)

        random.seed(3)
        first = run("a")
        random.seed(3)
        second = run("b")
        third = run("c")
        print(json.dumps([first == second, first != third, "numpy" in sys.modules, first]))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    repeated, differs, numpy_imported, configs = json.loads(out.stdout.strip().splitlines()[-1])
    assert repeated and differs and not numpy_imported
    assert len(configs) == 6
    for config in map(json.loads, configs):
        assert -1 <= config["u"] < 1 and config["q"] in [round(k / 10, 1) for k in range(11)]
        assert 1e-4 <= config["lu"] <= 1e-1 and 1e-3 <= config["qlu"] <= 1
        assert round(config["qlu"], 3) == config["qlu"]
        assert isinstance(config["n"], float) and config["qn"] % 0.5 == 0
        assert config["i"] in range(10) and config["qi"] in (0, 5, 10, 15, 20)
        assert config["li"] in range(1, 100) and config["qli"] % 2 == 0 and 2 <= config["qli"] <= 64
        assert config["c"] in ("a", "b", "c") and config["g"] in (1, 2)
