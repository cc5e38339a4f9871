"""Search spaces and search algorithms (``ray.tune.search``).

Example:
    >>> from fasttune import search
    >>> space = {"lr": search.loguniform(1e-4, 1e-1), "act": search.grid_search(["relu", "tanh"])}
    >>> [config["act"] for _, config in search.generate_variants(space, random_state=0)]
    ['relu', 'tanh']
"""

from fasttune.search.basic_variant import BasicVariantGenerator
from fasttune.search.sample import (
    Categorical,
    Domain,
    Float,
    Function,
    Integer,
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
from fasttune.search.search_algorithm import SearchAlgorithm, Suggestion
from fasttune.search.search_generator import SearchGenerator
from fasttune.search.searcher import Searcher
from fasttune.search.variant_generator import generate_variants

__all__ = [
    "BasicVariantGenerator",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "SearchAlgorithm",
    "SearchGenerator",
    "Searcher",
    "Suggestion",
    "choice",
    "generate_variants",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]
