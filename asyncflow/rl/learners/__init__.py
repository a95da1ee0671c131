"""Learners' tools: Adam on one flat buffer with the non-finite guard (``optim.py``), devices
(``device.py``), bfloat16 precision (``precision.py``), V-trace (``vtrace.py``), and the base
of the continuous-control learners (``continuous.py``). Each algorithm's loss and learner
live in its own module under ``asyncflow/algorithms``."""
