"""Learning from data: experiences written by any run, read by any run.

- ``minari_format``: Minari's on-disk format (the Farama standard), which asyncflow
  writes and reads;
- ``writer``: ``ExperienceWriter``, which a rollout worker uses to write what it
  samples as a shard of its own (``output=``);
- ``dataset``: a dataset on disk (asyncflow's shards or any Minari dataset) checked
  before any process starts, and read into transitions;
- ``reader``: ``DatasetShard``, the actor that holds part of a dataset and answers
  ``replay(n)`` like a replay shard, so an offline plan reads like an online one.
"""
