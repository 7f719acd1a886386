"""What a run fetches: the listing selected by patterns, checked for safe paths and batched (`safe_paths`, `selection`),
kept on disk (`index`), what is still to do (`todo`), a plan split over initializers (`shares`), and DRY_RUN's output.

May import `common`, `config`, `destination` and `transfer`.
"""
