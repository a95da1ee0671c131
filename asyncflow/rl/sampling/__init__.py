"""Sampling: the rollout workers that step envs with a policy (``rollout_worker.py``, one
stepping loop over the ``Lanes`` of ``lanes.py``: ``env_lanes.py``, ``vector_lanes.py``;
``async_worker.py``, ``multi_agent_worker.py``, ``evaluation_worker.py``), what they record
and how it becomes a batch (``recorder.py``), the trajectory pipeline they share
(``trajectory.py``, ``postprocessing.py``, ``normalization.py``, ``episodes.py``), and the
set of worker actors a plan samples from (``worker_set.py``)."""
