"""Everything that runs inside one trial: the class API, the function API, the session."""

from fasttune.trainable.context import TuneContext, get_context
from fasttune.trainable.function_trainable import FunctionTrainable, wrap_function
from fasttune.trainable.session import get_checkpoint, report
from fasttune.trainable.trainable import Trainable
from fasttune.trainable.trial_info import TrialInfo
from fasttune.trainable.util import with_parameters, with_resources

__all__ = [
    "FunctionTrainable",
    "Trainable",
    "TrialInfo",
    "TuneContext",
    "get_checkpoint",
    "get_context",
    "report",
    "with_parameters",
    "with_resources",
    "wrap_function",
]
