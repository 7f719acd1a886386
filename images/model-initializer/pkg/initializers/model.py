"""`python -m pkg.initializers.model`, as the Kubeflow SDK's container backend runs the model image."""

from initializers.model import main

if __name__ == "__main__":
    main()
