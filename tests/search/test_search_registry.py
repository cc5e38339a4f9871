"""create_searcher / SEARCH_ALG_IMPORT: Ray's names, lazy imports, kwargs trimming, errors."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from fasttune.search._registry import SEARCH_ALG_IMPORT, create_searcher
from fasttune.search.basic_variant import BasicVariantGenerator
from fasttune.search.searcher import Searcher

# Ray Tune 2.x's names (ray/tune/search/__init__.py).
RAY_NAMES = {
    "variant_generator", "random", "ax", "hyperopt", "bayesopt", "bohb", "nevergrad",
    "optuna", "vizier", "zoopt", "hebo",
}  # fmt: skip
INTEGRATIONS = {
    "optuna": ("fasttune.search.optuna", "OptunaSearch"),
    "hyperopt": ("fasttune.search.hyperopt", "HyperOptSearch"),
    "bayesopt": ("fasttune.search.bayesopt", "BayesOptSearch"),
    "nevergrad": ("fasttune.search.nevergrad", "NevergradSearch"),
    "bohb": ("fasttune.search.bohb", "TuneBOHB"),
    "zoopt": ("fasttune.search.zoopt", "ZOOptSearch"),
    "ax": ("fasttune.search.ax", "AxSearch"),
    "hebo": ("fasttune.search.hebo", "HEBOSearch"),
}
NOT_PROVIDED = {
    "vizier": "VizierSearch",
}


def test_names_are_rays():
    assert set(SEARCH_ALG_IMPORT) == RAY_NAMES


@pytest.mark.parametrize("name", ["random", "variant_generator", "Random", " RANDOM "])
def test_random_and_variant_generator_build_the_default_generator(name):
    assert SEARCH_ALG_IMPORT[name.strip().lower()]() is BasicVariantGenerator
    searcher = create_searcher(name, max_concurrent=3, metric="loss", mode="min")
    assert type(searcher) is BasicVariantGenerator
    assert searcher.max_concurrent == 3  # accepted kwargs arrive; metric/mode are dropped


@pytest.mark.parametrize("name", sorted(INTEGRATIONS))
def test_integration_names_resolve(name):
    module_name, class_name = INTEGRATIONS[name]
    cls = getattr(importlib.import_module(module_name), class_name)
    assert SEARCH_ALG_IMPORT[name]() is cls
    # budget: ZOOptSearch needs one (as Ray's); the others drop it
    searcher = create_searcher(name, metric="loss", mode="min", budget=10, not_an_argument=1)
    assert isinstance(searcher, cls) and isinstance(searcher, Searcher)
    assert (searcher.metric, searcher.mode) == ("loss", "min")


@pytest.mark.parametrize("name", sorted(NOT_PROVIDED))
def test_rays_names_fasttune_lacks_say_so(name):
    with pytest.raises(ImportError, match=rf"does not provide Ray Tune's '{name}'.*'optuna'"):
        create_searcher(name)
    with pytest.raises(ImportError, match=NOT_PROVIDED[name]):
        SEARCH_ALG_IMPORT[name]()


def test_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match=r"unknown search algorithm 'skopt'.*'hyperopt'"):
        create_searcher("skopt")


def test_name_must_be_a_string():
    with pytest.raises(TypeError, match="`search_alg` must be a name"):
        create_searcher(BasicVariantGenerator)


class Strict(Searcher):
    def __init__(self, metric=None, mode=None, *, seed=0):
        super().__init__(metric=metric, mode=mode)
        self.seed = seed


class Open(Searcher):
    def __init__(self, metric=None, **options):
        super().__init__(metric=metric)
        self.options = options


def test_kwargs_the_class_does_not_take_are_dropped(monkeypatch):
    monkeypatch.setitem(SEARCH_ALG_IMPORT, "strict", lambda: Strict)
    searcher = create_searcher("strict", metric="m", seed=7, points_to_evaluate=[{}])
    assert (searcher.metric, searcher.seed) == ("m", 7)


def test_a_class_with_var_kwargs_gets_everything(monkeypatch):
    monkeypatch.setitem(SEARCH_ALG_IMPORT, "open", lambda: Open)
    searcher = create_searcher("open", metric="m", a=1, b=2)
    assert searcher.options == {"a": 1, "b": 2}


def test_no_optional_library_is_imported_until_asked_for():
    code = (
        "import sys\n"
        "from fasttune.search._registry import create_searcher\n"
        "create_searcher('random')\n"
        "heavy = {'optuna', 'hyperopt', 'bayes_opt', 'nevergrad', 'ConfigSpace', 'sklearn'}\n"
        "heavy |= {'fasttune.search.' + m for m in ('optuna', 'hyperopt', 'bohb')}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
