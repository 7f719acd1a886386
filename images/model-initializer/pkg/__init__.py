"""The image layout the Kubeflow SDK's container backend expects: `python -m pkg.initializers.<kind>` from /app."""
