"""`model-initializer` / `python -m initializers.model`."""

from initializers.process import early_stops

early_stops.catch()  # before the heavy imports below: a stop from here on reads as a stop

from initializers.cli import main as _main  # noqa: E402
from initializers.sources import MODEL  # noqa: E402


def main() -> None:
    _main(MODEL)


if __name__ == "__main__":
    main()
