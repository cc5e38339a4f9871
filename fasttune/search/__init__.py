"""Search spaces and search algorithms (``ray.tune.search``).

Example:
    >>> from fasttune import search
    >>> space = {"lr": search.loguniform(1e-4, 1e-1), "act": search.grid_search(["relu", "tanh"])}
    >>> [config["act"] for _, config in search.generate_variants(space, random_state=0)]
    ['relu', 'tanh']
"""

from fasttune._support.lazy_names import lazy_names
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

# Search algorithms load on first use, so importing the sampling functions stays cheap.
_LAZY = {
    "BasicVariantGenerator": "fasttune.search.basic_variant",
    "SearchAlgorithm": "fasttune.search.search_algorithm",
    "Suggestion": "fasttune.search.search_algorithm",
    "SearchGenerator": "fasttune.search.search_generator",
    "Searcher": "fasttune.search.searcher",
    "generate_variants": "fasttune.search.variant_generator",
    "ConcurrencyLimiter": "fasttune.search.concurrency_limiter",
    "Repeater": "fasttune.search.repeater",
    "create_searcher": "fasttune.search._registry",
    "SEARCH_ALG_IMPORT": "fasttune.search._registry",
}


__getattr__ = lazy_names(globals(), _LAZY)


__all__ = [
    "SEARCH_ALG_IMPORT",
    "BasicVariantGenerator",
    "Categorical",
    "ConcurrencyLimiter",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "Repeater",
    "SearchAlgorithm",
    "SearchGenerator",
    "Searcher",
    "Suggestion",
    "choice",
    "create_searcher",
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
