"""Compatibility entry points for the Kubeflow SDK's command override; they run this project's programs."""
