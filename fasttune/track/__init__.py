"""Ray Tune's legacy ``tune.track`` API: log one trial's results outside a Tuner.

Example::

    from fasttune.track import TrackSession

    session = TrackSession(trial_name="baseline", trial_config={"lr": 0.1})
    session.log(loss=0.5)
    session.close()
"""

from fasttune.track.session import TrackSession

__all__ = ["TrackSession"]
