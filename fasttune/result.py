"""Names of the keys fasttune fills into every result (as ``ray.tune.result``)."""

from __future__ import annotations

# Reported by the user, or filled in when absent.
DONE = "done"
SHOULD_CHECKPOINT = "should_checkpoint"
MEAN_LOSS = "mean_loss"
NEG_MEAN_LOSS = "neg_mean_loss"
MEAN_ACCURACY = "mean_accuracy"
DEFAULT_METRIC = "_metric"

# Counters and timers kept by the Trainable.
TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TIMESTEPS_THIS_ITER = "timesteps_this_iter"
TIMESTEPS_TOTAL = "timesteps_total"
EPISODES_THIS_ITER = "episodes_this_iter"
EPISODES_TOTAL = "episodes_total"
TIMESTEPS_SINCE_RESTORE = "timesteps_since_restore"
TIME_SINCE_RESTORE = "time_since_restore"
ITERATIONS_SINCE_RESTORE = "iterations_since_restore"
WARMUP_TIME = "warmup_time"

# Identity and environment of the process that produced the result.
EXPERIMENT_ID = "experiment_id"
TRIAL_ID = "trial_id"
EXPERIMENT_TAG = "experiment_tag"
DATE = "date"
TIMESTAMP = "timestamp"
PID = "pid"
HOSTNAME = "hostname"
NODE_IP = "node_ip"
CONFIG = "config"
CHECKPOINT_DIR_NAME = "checkpoint_dir_name"

# Internal marker: the function trainable finished without a new result; the
# runner must not count this as a new iteration.
RESULT_DUPLICATE = "__duplicate__"

DEFAULT_RESULT_KEYS = (
    TRAINING_ITERATION,
    TIME_TOTAL_S,
    TIMESTEPS_TOTAL,
    MEAN_ACCURACY,
    MEAN_LOSS,
)

# Keys that are bookkeeping rather than metrics (hidden from progress tables).
AUTO_RESULT_KEYS = (
    TRAINING_ITERATION,
    TIME_TOTAL_S,
    EPISODES_TOTAL,
    TIMESTEPS_TOTAL,
    NODE_IP,
    HOSTNAME,
    PID,
    TIME_TOTAL_S,
    TIME_THIS_ITER_S,
    TIMESTAMP,
    DATE,
    TIME_SINCE_RESTORE,
    TIMESTEPS_SINCE_RESTORE,
    ITERATIONS_SINCE_RESTORE,
    CONFIG,
    WARMUP_TIME,
    EXPERIMENT_ID,
    TRIAL_ID,
    DONE,
)

# File names inside a trial directory.
EXPR_PARAM_FILE = "params.json"
EXPR_PARAM_PICKLE_FILE = "params.pkl"
EXPR_RESULT_FILE = "result.json"
EXPR_PROGRESS_FILE = "progress.csv"
EXPR_ERROR_FILE = "error.txt"
EXPR_ERROR_PICKLE_FILE = "error.pkl"
