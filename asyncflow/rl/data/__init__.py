"""Data: batches of experience (``sample_batch.py``) over nested observations (``tree.py``),
replay buffers (``replay_buffer.py``, ``sum_tree.py``, ``frame_store.py``, and a buffer
served as an actor, ``replay_actor.py``), and state as checkpoints store it
(``state.py``, ``state_tree.py``)."""
