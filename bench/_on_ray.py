"""A workload's fasttune target with fasttune on a Ray instance of this machine.

Usage: python _on_ray.py SCRIPT WORKLOAD
SCRIPT is ``../shared/bench/workloads.py`` or a script with the same interface
(``SCRIPT fasttune WORKLOAD`` prints a RESULT line). Ray starts as the script starts it
for Ray Tune (``ray.init(num_cpus=2, ...)``, not timed, like Ray Tune's start; always a
new instance, never a cluster another process runs), then the user's one line,
``fasttune.init(address="auto")``, sends the same workload's trials to Ray actors: the
figures compare fasttune's Ray executor with Ray Tune on the same Ray.
"""

import runpy
import sys

import ray

import fasttune

script, workload = sys.argv[1], sys.argv[2]
ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
fasttune.init(address="auto")  # this process is connected: fasttune uses that connection
sys.argv = [script, "fasttune", workload]
runpy.run_path(script, run_name="__main__")
