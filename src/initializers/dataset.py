"""`dataset-initializer` / `python -m initializers.dataset`."""

from initializers.process import early_stops

early_stops.catch()  # before the heavy imports below: a stop from here on reads as a stop

from initializers.cli import main as _main  # noqa: E402
from initializers.sources import DATASET  # noqa: E402


def main() -> None:
    _main(DATASET)


if __name__ == "__main__":
    main()
