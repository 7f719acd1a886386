"""`dataset-initializer` / `python -m initializers.dataset`."""

from initializers.cli import main as _main
from initializers.config.contract import DATASET


def main() -> None:
    _main(DATASET)


if __name__ == "__main__":
    main()
