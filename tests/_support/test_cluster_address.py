"""Where trials run: fasttune.init(address=...), FASTTUNE_ADDRESS, or this machine."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import fasttune as tune
from fasttune._support.cluster_address import RayTarget, ray_target
from fasttune._support.imports import MissingDependencyError


@pytest.fixture(autouse=True)
def _forget(monkeypatch):
    monkeypatch.delenv("FASTTUNE_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield
    tune.shutdown()


@pytest.fixture
def ray_installed():
    """Skips where ray cannot be imported (tests/test_without_ray.py runs this module so)."""
    if sys.modules.get("ray", False) is None or importlib.util.find_spec("ray") is None:
        pytest.skip("a Ray address needs ray: pip install 'fasttune[ray]'")


def test_by_default_trials_run_on_this_machine():
    assert ray_target() is None


def test_init_address_chooses_ray_and_passes_ray_init_arguments(ray_installed):
    tune.init(address="ray://head:10001", namespace="tuning", runtime_env={"pip": ["x"]})
    assert ray_target() == RayTarget(
        "ray://head:10001", {"namespace": "tuning", "runtime_env": {"pip": ["x"]}}
    )
    assert tune.is_initialized()
    tune.init(num_cpus=2)  # a second call replaces the first: local again
    assert ray_target() is None
    tune.init("auto")  # positional, as ray.init("auto")
    assert ray_target() == RayTarget("auto", {})
    tune.shutdown()
    assert ray_target() is None


def test_the_environment_variable_and_local(monkeypatch, ray_installed):
    monkeypatch.setenv("FASTTUNE_ADDRESS", "auto")
    assert ray_target() == RayTarget("auto", {})
    tune.init(address="local")  # forces local workers over the variable
    assert ray_target() is None
    tune.init(address="10.0.0.1:6379")  # init wins over the variable
    assert ray_target() == RayTarget("10.0.0.1:6379", {})
    monkeypatch.setenv("FASTTUNE_ADDRESS", "local")
    tune.shutdown()
    assert ray_target() is None


def test_rays_own_address_variable_comes_after_fasttunes_choices(monkeypatch, ray_installed):
    # `ray job submit` sets RAY_ADDRESS, and Ray Tune's fit() connects there.
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert ray_target() == RayTarget("10.0.0.1:6379", {})
    monkeypatch.setenv("FASTTUNE_ADDRESS", "local")
    assert ray_target() is None
    monkeypatch.delenv("FASTTUNE_ADDRESS")
    tune.init(address="local")
    assert ray_target() is None
    tune.shutdown()
    monkeypatch.setenv("RAY_ADDRESS", "local")
    assert ray_target() is None


def test_rays_address_variable_without_ray_leaves_trials_here(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # ray cannot be imported
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert ray_target() is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"address": ""}, r"address=...\) must be a Ray address such as 'auto'"),
        ({"address": 6379}, "got 6379"),
        ({"address": "auto", "num_cpus": 2}, r"\['num_cpus'\] cannot be given with it"),
        ({"address": "auto", "resources": {"TPU": 1}}, r"\['resources'\] cannot be given"),
    ],
)
def test_bad_addresses_are_refused_clearly(kwargs, match, ray_installed):
    with pytest.raises(ValueError, match=match):
        tune.init(**kwargs)
    assert not tune.is_initialized()


def test_a_ray_address_without_ray_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # ray cannot be imported from here on
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[ray\]"'):
        tune.init(address="auto")
    assert ray_target() is None
    monkeypatch.setenv("FASTTUNE_ADDRESS", "auto")
    tuner = tune.Tuner(
        lambda config: tune.report({"x": 1}),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    with pytest.raises(MissingDependencyError, match=r'pip install "fasttune\[ray\]"'):
        tuner.fit()
    tune.init(address="local")  # local needs no ray
    assert tuner.fit().num_terminated == 1
