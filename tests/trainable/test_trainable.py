"""The class API: train() bookkeeping, checkpoints, reset, stop, logging."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys

import pytest

import fasttune as tune
from fasttune import result as R
from fasttune.trainable.trial_info import STDERR_FILE, STDOUT_FILE, TRIAL_INFO, TrialInfo


class Counter(tune.Trainable):
    def setup(self, config):
        self.config_seen = config
        self.value = config.get("start", 0)
        self.cleaned = False

    def step(self):
        self.value += 1
        return {"value": self.value, "mean_loss": 1.0 / self.value}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "value.txt"), "w") as f:
            f.write(str(self.value))

    def load_checkpoint(self, checkpoint):
        with open(os.path.join(checkpoint, "value.txt")) as f:
            self.value = int(f.read())

    def cleanup(self):
        self.cleaned = True


class DictCounter(Counter):
    def save_checkpoint(self, checkpoint_dir):
        return {"value": self.value}

    def load_checkpoint(self, checkpoint):
        assert isinstance(checkpoint, dict)
        self.value = checkpoint["value"]


class PathCounter(Counter):
    def save_checkpoint(self, checkpoint_dir):
        path = os.path.join(checkpoint_dir, "sub", "state.txt")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(str(self.value))
        return path

    def load_checkpoint(self, checkpoint):
        assert checkpoint.endswith(os.path.join("sub", "state.txt"))
        with open(checkpoint) as f:
            self.value = int(f.read())


def test_setup_receives_a_deep_copy(make_trainable):
    config = {"nested": {"a": 1}}
    t = make_trainable(Counter, config)
    t.config_seen["nested"]["a"] = 99
    assert t.config["nested"]["a"] == 1
    assert config == {"nested": {"a": 1}}


def test_train_autofills_bookkeeping(make_trainable):
    t = make_trainable(Counter, {"start": 0})
    first = t.train()
    second = t.train()
    assert second[R.TRAINING_ITERATION] == 2 and t.iteration == 2 == t.training_iteration
    for key in (
        R.DONE, R.TIME_THIS_ITER_S, R.TIME_TOTAL_S, R.TIME_SINCE_RESTORE,
        R.ITERATIONS_SINCE_RESTORE, R.EXPERIMENT_ID, R.TRIAL_ID, R.DATE, R.TIMESTAMP,
        R.PID, R.HOSTNAME, R.NODE_IP, R.CONFIG, R.WARMUP_TIME,
    ):  # fmt: skip
        assert key in second, key
    assert second[R.DONE] is False
    assert second[R.PID] == os.getpid()
    assert second[R.ITERATIONS_SINCE_RESTORE] == 2
    assert second[R.TIME_TOTAL_S] >= first[R.TIME_TOTAL_S]
    assert R.NEG_MEAN_LOSS not in second  # as in Ray Tune 2.x
    assert first[R.EXPERIMENT_ID] == second[R.EXPERIMENT_ID]
    assert R.TIMESTEPS_TOTAL not in second and R.EPISODES_TOTAL not in second
    assert second[R.CONFIG] == {"start": 0}


def test_timesteps_and_episodes_only_when_increments_reported(make_trainable):
    class Steps(tune.Trainable):
        def step(self):
            return {"timesteps_this_iter": 10, "episodes_this_iter": 2, "time_this_iter_s": 5.0}

    t = make_trainable(Steps)
    t.train()
    result = t.train()
    assert result[R.TIMESTEPS_TOTAL] == 20
    assert result[R.EPISODES_TOTAL] == 4
    assert result[R.TIMESTEPS_SINCE_RESTORE] == 20
    assert result[R.TIME_TOTAL_S] == pytest.approx(10.0)
    assert result[R.TIME_THIS_ITER_S] == 5.0


def test_user_done_is_kept(make_trainable):
    class Done(tune.Trainable):
        def step(self):
            return {"done": True}

    assert make_trainable(Done).train()[R.DONE] is True


def test_non_dict_step_is_a_clear_error(make_trainable):
    class Bad(tune.Trainable):
        def step(self):
            return 3.0

    with pytest.raises(TypeError, match=r"Bad.step\(\) must return a dict.*float"):
        make_trainable(Bad).train()


def test_step_exception_propagates_unchanged(make_trainable):
    class Boom(tune.Trainable):
        def step(self):
            raise ValueError("boom at step")

    with pytest.raises(ValueError, match="boom at step"):
        make_trainable(Boom).train()


def test_train_buffered_stops_on_each_condition(make_trainable):
    class Scripted(tune.Trainable):
        def setup(self, config):
            self.script = list(config["script"])

        def step(self):
            return self.script.pop(0) if self.script else {}

    t = make_trainable(Scripted, {"script": [{}, {}, {"done": True}, {}]})
    assert len(t.train_buffered(buffer_time_s=60)) == 3
    t = make_trainable(Scripted, {"script": [{}, {"should_checkpoint": True}, {}]})
    assert len(t.train_buffered(buffer_time_s=60)) == 2
    t = make_trainable(Scripted, {"script": [{}] * 10})
    assert len(t.train_buffered(buffer_time_s=60, max_buffer_length=4)) == 4
    t = make_trainable(Scripted, {"script": [{}] * 10})
    assert len(t.train_buffered(buffer_time_s=0)) == 1  # at least one result


@pytest.mark.parametrize("cls", [Counter, DictCounter, PathCounter])
def test_save_restore_roundtrip_restores_state_and_counters(make_trainable, cls):
    t = make_trainable(cls, {"start": 10})
    for _ in range(3):
        t.train()
    path = t.save()
    assert os.path.basename(path) == "checkpoint_000003"
    assert os.path.dirname(path) == t.logdir.rstrip(os.sep)

    t2 = make_trainable(cls, {"start": 0})
    assert t2.restore(path) is True
    assert t2.value == 13 and t2.iteration == 3
    result = t2.train()
    assert result["value"] == 14
    assert result[R.TRAINING_ITERATION] == 4
    assert result[R.ITERATIONS_SINCE_RESTORE] == 1
    assert result[R.TIME_TOTAL_S] >= result[R.TIME_SINCE_RESTORE]


def test_restore_accepts_checkpoint_object_and_inner_file(make_trainable):
    t = make_trainable(Counter, {"start": 5})
    t.train()
    path = t.save()
    t2 = make_trainable(Counter)
    t2.restore(tune.Checkpoint.from_directory(path))
    assert t2.value == 6 and t2.iteration == 1
    t3 = make_trainable(Counter)
    t3.restore(os.path.join(path, "value.txt"))
    assert t3.value == 6 and t3.iteration == 1


def test_save_into_given_directory(make_trainable, tmp_path):
    t = make_trainable(Counter)
    t.train()
    target = tmp_path / "mine"
    assert t.save(str(target)) == str(target)
    assert (target / "value.txt").read_text() == "1"


def test_save_twice_at_same_iteration_replaces(make_trainable):
    t = make_trainable(Counter)
    t.train()
    first = t.save()
    t.value = 42
    assert t.save() == first
    t2 = make_trainable(Counter)
    t2.restore(first)
    assert t2.value == 42
    leftovers = [n for n in os.listdir(t.logdir) if n.startswith(".checkpoint_tmp")]
    assert leftovers == []


def test_save_checkpoint_returning_outside_path_is_an_error(make_trainable, tmp_path):
    class Outside(Counter):
        def save_checkpoint(self, checkpoint_dir):
            return str(tmp_path)

    t = make_trainable(Outside)
    with pytest.raises(ValueError, match="outside the checkpoint directory"):
        t.save()


def test_restore_missing_path_is_a_clear_error(make_trainable, tmp_path):
    with pytest.raises(FileNotFoundError, match="No checkpoint found"):
        make_trainable(Counter).restore(str(tmp_path / "nope" / "file"))


def _restore_in_child(blob, queue):
    import cloudpickle

    cls, data = cloudpickle.loads(blob)
    t = cls(config={})
    t.restore_from_object(data)
    queue.put((t.value, t.train()[R.TRAINING_ITERATION]))
    t.stop()


def test_save_to_object_moves_state_between_processes(make_trainable):
    import cloudpickle

    t = make_trainable(DictCounter, {"start": 7})
    t.train()
    t.train()
    data = t.save_to_object()
    assert isinstance(data, bytes)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(
        target=_restore_in_child, args=(cloudpickle.dumps((DictCounter, data)), queue)
    )
    proc.start()
    value, iteration = queue.get(timeout=60)
    proc.join(timeout=60)
    assert (value, iteration) == (9, 3)


def test_reset_needs_reset_config(make_trainable):
    t = make_trainable(Counter)
    t.train()
    assert t.reset({"start": 100}) is False

    class Resettable(Counter):
        def reset_config(self, new_config):
            self.value = new_config["start"]
            return True

    t = make_trainable(Resettable)
    t.train()
    t.train()
    assert t.reset({"start": 100}) is True
    assert t.iteration == 0 and t.config == {"start": 100}
    result = t.train()
    assert result["value"] == 101 and result[R.TRAINING_ITERATION] == 1


def test_stop_calls_cleanup(make_trainable):
    t = make_trainable(Counter)
    t.train()
    t.stop()
    assert t.cleaned


def test_properties_with_trial_info(make_trainable, tmp_path):
    info = TrialInfo(
        trial_id="abc_00001", trial_name="Counter_abc_00001", experiment_name="exp",
        experiment_id="e1", resources={"cpu": 1},
    )  # fmt: skip
    t = make_trainable(Counter, {TRIAL_INFO: info, "start": 1})
    assert (t.trial_id, t.trial_name, t.trial_resources) == (
        "abc_00001",
        "Counter_abc_00001",
        {"cpu": 1},
    )
    assert TRIAL_INFO not in t.config and t.get_config() == {"start": 1}
    result = t.train()
    assert result[R.TRIAL_ID] == "abc_00001" and result[R.EXPERIMENT_ID] == "e1"


def test_standalone_defaults_write_logs_under_storage_path(_isolated_storage):
    t = Counter(config={"start": 1})
    try:
        t.train()
        t.train()
        assert t.trial_name == "default" and t.trial_id == "default"
        assert os.path.commonpath([t.logdir, str(_isolated_storage)]) == str(_isolated_storage)
        assert os.path.basename(t.logdir.rstrip(os.sep)).startswith("Counter_")
    finally:
        t.stop()
    with open(os.path.join(t.logdir, "result.json")) as f:
        lines = [json.loads(line) for line in f]
    assert [line["value"] for line in lines] == [2, 3]
    assert os.path.exists(os.path.join(t.logdir, "progress.csv"))
    assert json.load(open(os.path.join(t.logdir, "params.json"))) == {"start": 1}


def test_stdout_and_stderr_capture(make_trainable):
    class Chatty(tune.Trainable):
        def step(self):
            print("to stdout")
            print("to stderr", file=sys.stderr)
            return {}

    t = make_trainable(Chatty, {STDOUT_FILE: "out.log", STDERR_FILE: "err.log"})
    t.train()
    t.stop()
    assert open(os.path.join(t.logdir, "out.log")).read() == "to stdout\n"
    assert open(os.path.join(t.logdir, "err.log")).read() == "to stderr\n"
    print("after stop is not captured")
    assert "after stop" not in open(os.path.join(t.logdir, "out.log")).read()


def test_log_sys_usage_adds_perf_metrics(make_trainable):
    result = make_trainable(Counter, {"log_sys_usage": True}).train()
    assert 0 <= result["perf"]["cpu_util_percent"] <= 100
    assert 0 < result["perf"]["ram_util_percent"] <= 100


def test_export_model_and_resource_hooks(make_trainable):
    class Exporting(Counter):
        def _export_model(self, export_formats, export_dir):
            return {fmt: os.path.join(export_dir, fmt) for fmt in export_formats}

        @classmethod
        def default_resource_request(cls, config):
            return tune.PlacementGroupFactory([{"CPU": config["cpus"]}])

    t = make_trainable(Exporting)
    assert t.export_model("onnx") == {"onnx": os.path.join(t.logdir, "onnx")}
    assert Exporting.default_resource_request({"cpus": 3}).required_resources == {"CPU": 3}
    assert tune.Trainable.default_resource_request({}) is None
    assert tune.Trainable.resource_help({}) == ""


def test_unimplemented_save_checkpoint_says_what_to_do(make_trainable):
    class NoSave(tune.Trainable):
        def step(self):
            return {}

    t = make_trainable(NoSave)
    t.train()
    with pytest.raises(NotImplementedError, match="checkpoint_at_end=False"):
        t.save()
