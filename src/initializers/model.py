"""`model-initializer` / `python -m initializers.model`."""

from initializers.cli import main as _main
from initializers.config.contract import MODEL


def main() -> None:
    _main(MODEL)


if __name__ == "__main__":
    main()
