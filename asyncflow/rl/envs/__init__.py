"""Environments: building them from a gymnasium id or a callable (``make.py``), async envs
(``async_env.py``), Atari's preprocessing (``atari.py``), multi-agent envs
(``multi_agent.py``), which spaces asyncflow takes (``spaces.py``), action masks
(``action_mask.py``), and the checks of what an env returns (``checks.py``)."""
