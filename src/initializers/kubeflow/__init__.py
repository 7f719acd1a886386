"""The Kubeflow side: the SDK's initializer classes on the programs' own schema (`sdk`), what runs them elsewhere
(`specs`: docker/podman, Kubernetes init containers) and a local runner of both programs (`runner`).

May import every floor below; never what runs inside the programs (`run`, the transfer), only the schema and the
composition root's stores (`initializers.sources`).
"""
