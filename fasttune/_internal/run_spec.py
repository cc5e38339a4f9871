"""Everything the controller needs for one experiment, resolved by the Tuner."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fasttune._support.metric_mode import strict_metric_checking
from fasttune.config import CheckpointConfig, FailureConfig
from fasttune.executors.flow_control import FlowControl
from fasttune.result import DEFAULT_METRIC

if TYPE_CHECKING:
    from fasttune._internal.trial_factory import TrialFactory
    from fasttune.callback import CallbackList
    from fasttune.executors.base import Executor, ResourceAccounting
    from fasttune.logger.trial_result_files import ResultFileKinds
    from fasttune.schedulers.trial_scheduler import TrialScheduler
    from fasttune.search.search_algorithm import SearchAlgorithm
    from fasttune.stopper.stopper import Stopper
    from fasttune.storage.location import ExperimentStorage


@dataclass(frozen=True)
class RunSpec:
    """A fully resolved experiment: no defaults left to decide."""

    name: str
    experiment_path: str
    trainable_cls: type
    trainable_blob: bytes
    trainable_key: str
    param_space: dict[str, Any]
    num_samples: int
    search_alg: SearchAlgorithm
    scheduler: TrialScheduler
    executor: Executor
    resource_manager: ResourceAccounting
    trial_factory: TrialFactory
    callbacks: CallbackList
    stopper: Stopper | None = None
    metric: str | None = None
    mode: str | None = None
    checkpoint_config: CheckpointConfig = field(default_factory=CheckpointConfig)
    failure_config: FailureConfig = field(default_factory=FailureConfig)
    checkpoint_at_end: bool = False
    reuse_actors: bool = False
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    log_to_file: tuple[str | None, str | None] = (None, None)
    sync_artifacts: bool = False  # remote storage gets the trials' own files too
    chdir: bool = True
    flow: FlowControl = field(default_factory=FlowControl)
    max_pending_trials: int = 1
    snapshot_period_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    experiment_id: str = ""
    restored: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # Where the experiment is stored; None (tests building specs by hand): in place at
    # ``experiment_path``. For remote storage ``experiment_path`` is the staging directory.
    storage: ExperimentStorage | None = None
    # The default loggers' files the workers write themselves (None: the driver's
    # logger callbacks write them); see logger/trial_result_files.py.
    result_files: ResultFileKinds | None = None
    # With result_files: nothing on the driver looks at every result, so workers send
    # only the last of each batch (with the others' statistics).
    last_result_only: bool = False
    # A callback of the user's reads every result and may ask for a checkpoint in it
    # (Ray's should_checkpoint, set in the result it is given): trials wait for the
    # callbacks as for a decision (the lookahead bound, flow_control.CALLBACKS_ONLY,
    # where no scheduler decides; each grant after the callbacks).
    callbacks_decide: bool = False
    # Trials start in FIFO order on reused workers of an executor that can queue trials
    # behind a running one, this many (0: none): short trials are queued
    # (controller._queue_successors).
    queue_depth: int = 0

    @functools.cached_property  # once per run: the launch of every trial reads it
    def required_metrics(self) -> tuple[str, ...]:
        """The keys every result must carry, as Ray Tune checks them: the metric of the
        TuneConfig, of the scheduler and of the search algorithm (one or a list, as a
        multi-objective searcher has). None with ``TUNE_DISABLE_STRICT_METRIC_CHECKING=1``
        (Ray Tune's switch, which its error message names)."""
        if not strict_metric_checking():
            return ()
        named: list[Any] = [self.metric, getattr(self.scheduler, "metric", None)]
        searched = getattr(self.search_alg, "metric", None)
        named += searched if isinstance(searched, (list, tuple)) else [searched]
        return tuple(
            dict.fromkeys(m for m in named if isinstance(m, str) and m and m != DEFAULT_METRIC)
        )
