"""`python -m pkg.initializers.dataset`, as the Kubeflow SDK's container backend runs the dataset image."""

from initializers.dataset import main

if __name__ == "__main__":
    main()
