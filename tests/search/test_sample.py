"""Tests for fasttune.search.sample: domains, samplers and the sampling functions."""

from __future__ import annotations

import bisect
import math
import pickle
import random
import statistics
import subprocess
import sys

import numpy as np
import pytest

from fasttune.search import sample
from fasttune.search.sample import (
    Categorical,
    Domain,
    Float,
    Function,
    Grid,
    Integer,
    LogUniform,
    Normal,
    Quantized,
    Uniform,
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)

N = 4000  # draws for distribution checks; seeded, so the checks are deterministic


def draw(domain: Domain, size: int = N, seed: int = 0) -> list:
    return domain.sample(size=size, random_state=seed)


FLOAT_DOMAINS = {
    "uniform": lambda: uniform(-2, 3),
    "quniform": lambda: quniform(0, 1, 0.1),
    "loguniform": lambda: loguniform(1e-3, 10),
    "qloguniform": lambda: qloguniform(1, 100, 0.5),
    "randn": lambda: randn(5, 2),
    "qrandn": lambda: qrandn(0, 1, 0.25),
}
INT_DOMAINS = {
    "randint": lambda: randint(-3, 4),
    "qrandint": lambda: qrandint(0, 20, 4),
    "lograndint": lambda: lograndint(1, 1000),
    "qlograndint": lambda: qlograndint(2, 64, 2),
}


# --- types -------------------------------------------------------------------------


@pytest.mark.parametrize("make", FLOAT_DOMAINS.values(), ids=FLOAT_DOMAINS.keys())
def test_float_domains_give_python_floats(make):
    domain = make()
    assert type(domain.sample(random_state=1)) is float
    values = domain.sample(size=5, random_state=1)
    assert type(values) is list and len(values) == 5
    assert all(type(v) is float for v in values)


@pytest.mark.parametrize("make", INT_DOMAINS.values(), ids=INT_DOMAINS.keys())
def test_int_domains_give_python_ints(make):
    domain = make()
    assert type(domain.sample(random_state=1)) is int
    values = domain.sample(size=5, random_state=1)
    assert type(values) is list and len(values) == 5
    assert all(type(v) is int for v in values)


def test_choice_converts_numpy_categories_to_python_values():
    domain = choice(np.array([1, 2, 3]))
    assert domain.categories == [1, 2, 3]
    assert all(type(v) is int for v in draw(domain, 50))


def test_choice_returns_the_category_objects_themselves():
    first, second = {"layers": 2}, {"layers": 3}
    values = draw(choice([first, second]), 50)
    assert all(v is first or v is second for v in values)


# --- ranges and bound inclusion -----------------------------------------------------


def test_uniform_stays_in_range_and_spreads():
    values = draw(uniform(-2, 3))
    assert all(-2 <= v < 3 for v in values)
    assert min(values) < -1.9 and max(values) > 2.9
    assert statistics.mean(values) == pytest.approx(0.5, abs=0.1)


def test_quniform_rounds_to_clean_multiples_and_reaches_upper():
    values = draw(quniform(0, 1, 0.1))
    assert set(values) == {round(k * 0.1, 1) for k in range(11)}
    assert 0.3 in values  # not 0.30000000000000004
    assert 1.0 in values  # quantization makes the upper bound reachable


def test_quniform_narrows_to_multiples_inside_the_range():
    values = draw(quniform(0.5, 2.0, 0.5))
    assert set(values) == {0.5, 1.0, 1.5, 2.0}


def test_loguniform_is_log_distributed():
    values = draw(loguniform(1e-4, 1))
    assert all(1e-4 <= v <= 1 for v in values)
    assert math.log10(statistics.median(values)) == pytest.approx(-2, abs=0.15)
    per_decade = [sum(10**-e <= v < 10 ** (1 - e) for v in values) for e in range(1, 5)]
    assert all(abs(count - N / 4) < N / 16 for count in per_decade)


def test_loguniform_base_does_not_change_the_distribution():
    assert draw(loguniform(1, 100, base=2), 20) == draw(loguniform(1, 100), 20)


def test_qloguniform_values_are_multiples_within_bounds():
    values = draw(qloguniform(1, 100, 0.5))
    assert all(1 <= v <= 100 and (v / 0.5).is_integer() for v in values)
    assert statistics.median(values) == pytest.approx(10, rel=0.2)


def test_randn_matches_mean_and_sd():
    values = draw(randn(5, 2))
    assert statistics.mean(values) == pytest.approx(5, abs=0.15)
    assert statistics.stdev(values) == pytest.approx(2, abs=0.15)


def test_randn_defaults_to_standard_normal():
    values = draw(randn())
    assert statistics.mean(values) == pytest.approx(0, abs=0.1)
    assert statistics.stdev(values) == pytest.approx(1, abs=0.1)


def test_qrandn_values_are_multiples_of_q():
    values = draw(qrandn(0, 1, 0.25))
    assert all((v / 0.25).is_integer() for v in values)
    assert statistics.mean(values) == pytest.approx(0, abs=0.1)


def test_randint_excludes_upper():
    assert set(draw(randint(0, 3))) == {0, 1, 2}


def test_qrandint_includes_upper():
    assert set(draw(qrandint(1, 3))) == {1, 2, 3}
    assert set(draw(qrandint(0, 20, 5))) == {0, 5, 10, 15, 20}


def test_qrandint_only_gives_multiples_inside_the_range():
    assert set(draw(qrandint(3, 22, 5))) == {5, 10, 15, 20}


def test_lograndint_excludes_upper_and_favours_small_values():
    values = draw(lograndint(1, 10))
    assert set(values) == set(range(1, 10))
    assert values.count(1) > values.count(9) * 3


def test_qlograndint_includes_upper():
    assert set(draw(qlograndint(1, 10, 1))) == set(range(1, 11))
    values = draw(qlograndint(2, 64, 2))
    assert all(v % 2 == 0 and 2 <= v <= 64 for v in values)
    assert 64 in values


def test_choice_draws_every_category_evenly():
    values = draw(choice(["a", "b", "c"]))
    assert {values.count(c) for c in "abc"} <= set(range(N // 3 - 150, N // 3 + 150))


# --- random_state -------------------------------------------------------------------


@pytest.mark.parametrize("make", [*FLOAT_DOMAINS.values(), *INT_DOMAINS.values()])
def test_int_seed_is_reproducible(make):
    assert draw(make(), 10, seed=7) == draw(make(), 10, seed=7)
    assert draw(make(), 10, seed=7) != draw(make(), 10, seed=8)


def test_generator_and_random_state_are_accepted_and_advance():
    for rng_type in (np.random.default_rng, np.random.RandomState):
        first = uniform(0, 1).sample(size=3, random_state=rng_type(3))
        rng = rng_type(3)
        assert uniform(0, 1).sample(size=3, random_state=rng) == first
        assert uniform(0, 1).sample(size=3, random_state=rng) != first
        assert all(0 <= v < 5 for v in randint(0, 5).sample(size=10, random_state=rng))


def test_none_uses_numpy_global_seed():
    np.random.seed(11)
    first = uniform(0, 1).sample(size=3)
    np.random.seed(11)
    assert uniform(0, 1).sample(size=3) == first


@pytest.mark.parametrize(
    "make", [*FLOAT_DOMAINS.values(), *INT_DOMAINS.values()], ids=[*FLOAT_DOMAINS, *INT_DOMAINS]
)
def test_python_random_draws_follow_the_same_distribution_as_numpy(make):
    """Without numpy imported, draws come from Python's ``random``: same values kind,
    same validity, and the same distribution (two-sample Kolmogorov-Smirnov)."""
    domain = make()
    ours, numpys = domain.sample(size=N, random_state=random.Random(0)), draw(domain)
    assert {type(v) for v in ours} == {type(v) for v in numpys}
    assert all(domain.is_valid(v) for v in ours)
    assert domain.sample(size=5, random_state=random.Random(1)) == domain.sample(
        size=5, random_state=random.Random(1)
    )
    points = sorted(set(ours) | set(numpys))
    ours_sorted, numpys_sorted = sorted(ours), sorted(numpys)
    distance = max(
        abs(bisect.bisect_right(ours_sorted, x) - bisect.bisect_right(numpys_sorted, x)) / N
        for x in points
    )
    assert distance < 0.06, distance


def test_none_draws_from_python_random_while_numpy_is_not_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy")
    domains = [uniform(0, 1), randint(0, 100), choice(["a", "b", "c"])]
    random.seed(4)
    first = [domain.sample() for domain in domains]
    random.seed(4)
    assert [domain.sample() for domain in domains] == first
    assert "numpy" not in sys.modules


def test_bad_random_state_is_rejected():
    with pytest.raises(TypeError, match="random_state"):
        uniform(0, 1).sample(random_state="seed")


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_bad_size_is_rejected(size):
    with pytest.raises(ValueError, match="`size` must be an int >= 1"):
        uniform(0, 1).sample(size=size)


# --- validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: uniform(1, 0), r"uniform: `lower` must be less than `upper`.*lower=1.*upper=0"),
        (lambda: uniform(1, 1), r"`lower` must be less than `upper`"),
        (lambda: uniform(0, math.inf), r"uniform: `upper` must be a finite number"),
        (lambda: quniform(2, 1, 0.5), r"quniform: `lower` must be less than `upper`"),
        (lambda: quniform(0, 1, 0), r"quniform: `q` must be greater than 0, got q=0"),
        (lambda: quniform(0, 1, 0.3), r"`upper`=1 is not a multiple of q=0.3"),
        (lambda: loguniform(0, 1), r"loguniform: `lower` must be greater than 0.*lower=0"),
        (lambda: loguniform(-1, 1), r"`lower` must be greater than 0.*lower=-1"),
        (lambda: loguniform(1e-2, 1e-4), r"`lower` must be less than `upper`"),
        (lambda: loguniform(1, 10, base=1), r"`base` must not be 1"),
        (lambda: qloguniform(0, 1, 0.1), r"qloguniform: `lower` must be greater than 0"),
        (lambda: qloguniform(1, 10, -1), r"qloguniform: `q` must be greater than 0"),
        (lambda: randn(0, 0), r"randn: `sd` must be greater than 0, got sd=0"),
        (lambda: randn(0, -1), r"`sd` must be greater than 0, got sd=-1"),
        (lambda: qrandn(0, 0, 1), r"qrandn: `sd` must be greater than 0"),
        (lambda: qrandn(0, 1, 0), r"qrandn: `q` must be greater than 0"),
        (lambda: randint(5, 5), r"randint: `lower` must be less than `upper`.*lower=5.*upper=5"),
        (lambda: qrandint(5, 1), r"qrandint: `lower` must be less than `upper`"),
        (lambda: qrandint(0, 10, 0), r"qrandint: `q` must be greater than 0"),
        (lambda: qrandint(1, 4, 5), r"No multiple of q=5 lies between lower=1 and upper=4"),
        (lambda: lograndint(0, 10), r"lograndint: `lower` must be greater than 0"),
        (lambda: qlograndint(0, 10, 1), r"qlograndint: `lower` must be greater than 0"),
        (lambda: qlograndint(1, 10, -2), r"qlograndint: `q` must be greater than 0"),
        (lambda: choice([]), r"`categories` must not be empty"),
        (lambda: grid_search([]), r"`categories` must not be empty"),
    ],
)
def test_invalid_arguments_raise_value_error_naming_the_parameter(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: uniform("0", 1), r"uniform: `lower` must be a number, got '0' \(str\)"),
        (lambda: uniform(0, None), r"uniform: `upper` must be a number"),
        (lambda: randint(0, 2.5), r"randint: `upper` must be an integer, got 2.5"),
        (lambda: qrandint(0, 10, 0.5), r"qrandint: `q` must be an integer"),
        (lambda: choice("abc"), r"`categories` must be a list .*got 'abc' \(str\)"),
        (lambda: choice(5), r"`categories` must be a list .*got 5 \(int\)"),
        (lambda: choice({"a": 1}), r"`categories` must be a list"),
        (lambda: grid_search(3), r"`categories` must be a list"),
        (lambda: sample_from(3), r"sample_from: `func` must be callable"),
        (lambda: randn(mean=True), r"randn: `mean` must be a number"),
    ],
)
def test_wrong_types_raise_type_error(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_whole_floats_are_accepted_as_int_bounds():
    domain = randint(0.0, 3.0)
    assert (domain.lower, domain.upper) == (0, 3)
    assert type(domain.lower) is int


# --- samplers and domain objects ----------------------------------------------------


def test_samplers_are_the_ray_sampler_types():
    assert isinstance(uniform(0, 1).get_sampler(), Uniform)
    assert isinstance(loguniform(1, 2).get_sampler(), LogUniform)
    assert isinstance(randint(0, 2).get_sampler(), Uniform)
    assert isinstance(lograndint(1, 9).get_sampler(), LogUniform)
    assert isinstance(choice([1]).get_sampler(), Uniform)
    normal = randn(3, 2).get_sampler()
    assert isinstance(normal, Normal) and (normal.mean, normal.sd) == (3, 2)
    quantized = quniform(0, 1, 0.5).get_sampler()
    assert isinstance(quantized, Quantized) and quantized.q == 0.5
    assert isinstance(quantized.get_sampler(), Uniform)
    assert isinstance(qlograndint(1, 10, 1).get_sampler().get_sampler(), LogUniform)
    assert isinstance(qrandn(0, 1, 1).get_sampler().get_sampler(), Normal)
    assert isinstance(Categorical([1, 2]).grid().get_sampler(), Grid)


def test_domain_methods_return_copies():
    base = Float(0, 1)
    uniform_domain = base.uniform()
    assert base.sampler is None and isinstance(uniform_domain.sampler, Uniform)
    quantized = uniform_domain.quantized(0.5)
    assert isinstance(uniform_domain.sampler, Uniform)
    assert isinstance(quantized.sampler, Quantized)


def test_only_one_sampler_per_domain():
    with pytest.raises(ValueError, match="already samples with Uniform"):
        Float(1, 10).uniform().loguniform()
    domain = Float(0, 1)
    domain.set_sampler(Float._Uniform())
    domain.set_sampler(Float._LogUniform(), allow_override=True)
    assert isinstance(domain.get_sampler(), LogUniform)


def test_requantizing_replaces_the_step():
    domain = quniform(0, 1, 0.5).quantized(0.25)
    assert domain.sampler.q == 0.25 and isinstance(domain.sampler.get_sampler(), Uniform)
    assert set(draw(domain, 500)) == {0, 0.25, 0.5, 0.75, 1.0}


def test_default_samplers():
    assert Float.default_sampler_cls is Float._Uniform
    assert 0 <= Float(0, 1).sample(random_state=0) < 1
    assert Integer(0, 3).sample(random_state=0) in (0, 1, 2)
    assert Categorical(["x", "y"]).sample(random_state=0) in ("x", "y")


def test_float_domain_rules():
    with pytest.raises(ValueError, match=r"Float.uniform: `lower` must be a finite bound"):
        Float(None, 1).uniform()
    with pytest.raises(ValueError, match="normal sampling needs an unbounded domain"):
        Float(0, 1).normal()
    with pytest.raises(ValueError, match="Uniform sampling needs finite bounds"):
        Float(None, None).sample()
    with pytest.raises(ValueError, match=r"Float.quantized: `lower`=0.05 is not a multiple"):
        Float(0.05, 1).uniform().quantized(0.1)


def test_is_valid():
    assert uniform(0, 1).is_valid(0.5) and uniform(0, 1).is_valid(1)
    assert not uniform(0, 1).is_valid(1.5)
    assert not uniform(0, 1).is_valid("0.5")
    assert randn().is_valid(1e9)
    assert randint(0, 3).is_valid(2) and not randint(0, 3).is_valid(3)
    assert not randint(0, 3).is_valid(1.5)
    assert qrandint(0, 3).is_valid(3)
    assert choice(["a", "b"]).is_valid("a") and not choice(["a", "b"]).is_valid("c")
    assert sample_from(lambda: 1).is_valid(object())


def test_domain_str_and_flags():
    assert uniform(0, 1).domain_str == "(0, 1)"
    assert randint(2, 5).domain_str == "(2, 5)"
    assert choice([1, 2]).domain_str == "[1, 2]"
    assert randn().domain_str == "(-inf, inf)"
    assert Categorical([1, 2]).grid().is_grid()
    assert not choice([1, 2]).is_grid() and not uniform(0, 1).is_function()
    assert sample_from(lambda: 1).is_function()
    assert "Float(0, 1)" in repr(uniform(0, 1))


def test_categorical_supports_len_and_indexing():
    domain = choice(["a", "b", "c"])
    assert len(domain) == 3
    assert domain[1] == "b" and domain[-1] == "c" and domain[:2] == ["a", "b"]


def test_grid_domain_cannot_be_sampled():
    with pytest.raises(RuntimeError, match="cannot be sampled"):
        Categorical([1, 2]).grid().sample()


def test_grid_search_returns_rays_plain_dict():
    assert grid_search([1, 2]) == {"grid_search": [1, 2]}
    assert grid_search(x * 2 for x in range(3)) == {"grid_search": [0, 2, 4]}


def test_domains_pickle():
    for domain in [uniform(0, 1), qloguniform(1, 10, 0.5), randn(1, 2), qrandint(0, 9, 3)]:
        restored = pickle.loads(pickle.dumps(domain))
        assert draw(restored, 5) == draw(domain, 5)


# --- sample_from --------------------------------------------------------------------


def test_sample_from_zero_argument_function():
    counter = iter(range(100))
    domain = sample_from(lambda: next(counter))
    assert isinstance(domain, Function) and not domain.pass_config
    assert domain.sample() == 0
    assert domain.sample(size=3) == [1, 2, 3]


def test_sample_from_reads_config_in_both_styles():
    config = {"a": 3, "nested": {"b": 4}}
    assert sample_from(lambda config: config["a"] * 2).sample(config=config) == 6
    assert sample_from(lambda spec: spec.config.a * 2).sample(config=config) == 6
    assert sample_from(lambda spec: spec.config.nested.b).sample(config=config) == 4
    assert sample_from(lambda spec: spec["config"]["nested"]["b"]).sample(config=config) == 4
    spec = {"config": config}
    assert sample_from(lambda spec: spec.config.a + 1).sample(config=spec) == 4


def test_sample_from_with_a_list_of_configs():
    domain = sample_from(lambda config: config["a"])
    assert domain.sample(config=[{"a": 1}, {"a": 2}], size=2) == [1, 2]


def test_sample_from_missing_key_reports_the_original_error():
    with pytest.raises(KeyError, match="missing"):
        sample_from(lambda config: config["missing"]).sample(config={"a": 1})
    with pytest.raises(AttributeError, match="has no key 'missing'"):
        sample_from(lambda spec: spec.missing).sample(config={"a": 1})


def test_sample_from_rejects_functions_needing_two_arguments():
    with pytest.raises(ValueError, match="must accept zero arguments or one"):
        sample_from(lambda a, b: a + b)


def test_sample_from_accepts_defaults_and_builtins():
    assert sample_from(lambda config, scale=2: config["a"] * scale).sample(config={"a": 2}) == 4
    assert 0 <= sample_from(random.random).sample() < 1


def test_spec_view_is_read_only():
    def mutate(config):
        config.a = 5

    with pytest.raises(TypeError, match="read-only"):
        sample_from(mutate).sample(config={"a": 1})


# --- module hygiene ---------------------------------------------------------------


def test_module_exports():
    for name in sample.__all__:
        assert hasattr(sample, name), name


def test_search_modules_do_not_import_numpy_at_import_time():
    code = (
        "import sys\n"
        "import fasttune.search.sample, fasttune.search.variant_generator\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported at import time'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
