"""Policies: what a worker runs to act (actor-critic, recurrent, epsilon-greedy, continuous,
random, and the built-in MLP in numpy). The actor-critic policy also learns: its
``learn_on_batch`` takes the algorithm's loss (``algorithms/ppo.py`` and the others)."""
