"""Sampling: the rollout workers that step envs with a policy (``rollout_worker.py``,
``async_worker.py``, ``multi_agent_worker.py``, ``evaluation_worker.py``), the trajectory
pipeline they share (``trajectory.py``, ``postprocessing.py``, ``normalization.py``), and
the set of worker actors a plan samples from (``worker_set.py``)."""
