"""Flow control: how far a trial may run ahead of the driver's decisions.

Every rule lives here; the worker loop, the launch record, the spec builder and the
controller only call what this module defines.

Credit and acknowledgement
    A trial starts with :attr:`FlowControl.credit` iterations it may run before the
    driver answers. The driver answers each batch of results with one grant, which
    adds that much credit *and* acknowledges those results; it sends it as soon as
    the decision on the batch's last result is final (no stop, pause or plugin
    request), before the callbacks run.

Lookahead bound
    Within its credit, a trial starts its next iteration only while
    ``unacknowledged iterations x its measured iteration time < lookahead_s``
    (20 ms), and always when nothing is unacknowledged (:func:`may_run`). The
    measured time rises at once with a slower iteration and halves towards faster
    ones (:func:`next_iteration_estimate`). So loops of microseconds run up to the
    credit ahead, sending results in batches, while a trial whose iterations take
    20 ms or more waits for the decision on each result: a STOP or PAUSE decided on
    result *n* ends it right after iteration *n*.

Batching
    A worker sends its buffered results when a result is done, a duplicate, meets a
    stop criterion or asks for a checkpoint; when :attr:`FlowControl.max_buffer_length`
    results wait; when the next result would come later than
    :attr:`FlowControl.buffer_time_s` after the first; when the lookahead would be
    used up after the next iteration (the acknowledgement then travels while it
    runs) (:func:`should_send`); or when a command other than a grant is waiting,
    looked for after each iteration, at most every :data:`COMMAND_POLL_S` (a
    grant is applied on the spot: the driver answers every batch with one, and were
    it to end the next batch, batches would shrink to one round trip's worth).

Who gets which credit (:func:`for_scheduler`)
    A scheduler declares whether it tolerates decisions applied a little late with
    :attr:`fasttune.schedulers.TrialScheduler.supports_buffered_results`. Schedulers
    that decide on results get credit 1 unless they say otherwise: each trial waits
    for the decision on every result, whatever its iteration time. Stop criteria
    (``RunConfig(stop={...})``), ``done`` and checkpoint frequencies are applied by
    the worker itself, so they are exact in every case; a callable or ``Stopper``
    stop decides on the driver, within the lookahead bound.

Checkpoints
    After a result that carries a checkpoint, a trial waits for its grant before its
    next iteration, whatever its credit: the driver has then registered the
    checkpoint, so a driver killed at any moment costs at most the iterations since
    the trial's last checkpoint (plus the one in progress).

When nothing on the driver decides per result (:data:`UNDECIDED`)
    With no stopper and a scheduler that ignores intermediate results, the workers
    write the result files themselves (``logger/trial_result_files.py``) and no
    decision can come on a result: a trial has no lookahead bound and a credit of
    two full batches, so it never waits for the driver's answer; commands (a stop of
    the whole run, a pause) still reach it after its current iteration. The Ray
    executor, whose workers cannot write the files (the driver does), gets this flow
    in the same case, and keeps a second call queued behind the one a trial trains
    in: it then never waits for a round trip between machines either (and a function
    trainable trains in a thread of its actor, on while calls come and go).

When only the user's callbacks read results (:data:`CALLBACKS_ONLY`)
    A callback may ask for a checkpoint by setting ``should_checkpoint`` in the result
    it is given, as on Ray. Then the run keeps the undecided credit but the lookahead
    bound, and the driver sends each grant after the callbacks: a trial whose
    iterations take 20 ms or more saves right after the iteration whose result asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULT_CREDIT = 64
"""Iterations a trial may run unacknowledged when its scheduler tolerates lookahead."""

LOOKAHEAD_S = 0.02
"""The lookahead bound: unacknowledged iterations x iteration time stays under it."""

MAX_BUFFER_LENGTH = 1000
"""At most this many results travel in one message."""

BUFFER_TIME_S = 0.02
"""A worker sends buffered results at least this often."""

COMMAND_POLL_S = 0.001
"""A worker training looks for a waiting command at most this often (each look is a
system call, 6% of a worker's time when iterations take microseconds); iterations
longer than this look after each one."""


@dataclass(frozen=True)
class FlowControl:
    """The flow-control settings of a run.

    Attributes:
        credit: Iterations a trial may run before its first grant.
        lookahead_s: The lookahead bound (``math.inf`` leaves only the credit, as
            tests of the credit itself use).
        max_buffer_length: At most this many results per message.
        buffer_time_s: Buffered results are sent at least this often.
    """

    credit: int = DEFAULT_CREDIT
    lookahead_s: float = LOOKAHEAD_S
    max_buffer_length: int = MAX_BUFFER_LENGTH
    buffer_time_s: float = BUFFER_TIME_S


EXACT = FlowControl(credit=1)
"""Each trial waits for the decision on every result."""

UNDECIDED = FlowControl(credit=2 * MAX_BUFFER_LENGTH, lookahead_s=math.inf)
"""No decision comes on a result: trials never wait for an answer (see the module doc)."""

CALLBACKS_ONLY = FlowControl(credit=2 * MAX_BUFFER_LENGTH, lookahead_s=LOOKAHEAD_S)
"""Only the user's callbacks act on results (asking for a checkpoint in one): the credit
of :data:`UNDECIDED` within the lookahead bound (see the module doc)."""


def for_scheduler(scheduler: Any) -> FlowControl:
    """The flow control a run with ``scheduler`` gets (see the module doc).

    Reads the scheduler's public ``supports_buffered_results``; an object without it
    (a duck-typed scheduler) gets exact decisions unless it has Ray's private
    ``_supports_buffered_results = True``.
    """
    tolerates = getattr(scheduler, "supports_buffered_results", None)
    if tolerates is None:
        tolerates = getattr(scheduler, "_supports_buffered_results", False)
    return FlowControl() if tolerates else EXACT


def may_run(credit: int, unacked: int, iteration_s: float, lookahead_s: float) -> bool:
    """Whether a trial may start its next iteration now."""
    return credit > 0 and unacked * iteration_s < lookahead_s


def next_iteration_estimate(estimate: float, elapsed: float) -> float:
    """The measured iteration time after an iteration that took ``elapsed`` seconds."""
    return elapsed if elapsed > estimate else (estimate + elapsed) / 2


def should_send(
    now: float,
    elapsed: float,
    deadline: float,
    unacked: int,
    iteration_s: float,
    lookahead_s: float,
) -> bool:
    """Whether buffered results go now rather than after the next iteration.

    True when the next result is expected after ``deadline`` (the first buffered
    result's time plus the buffer time), or when the trial would have to wait for
    an acknowledgement after the next iteration.
    """
    return now + elapsed >= deadline or (unacked + 1) * iteration_s >= lookahead_s
