"""Side-by-side benchmarks (`make bench-s3`, `make bench-hf`); not part of `make test`."""
