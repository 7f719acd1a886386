"""Everything under OUTPUT_PATH: folders reached from descriptors, never through a link (`tree`, `output_path`),
temporaries renamed into place, the journal of finished files and its checkpoints on stable storage, the run lock,
each share's records, the manifest, and `state`, which lays them out under `.initializer/` around a run.

May import `common` and `config`.
"""
