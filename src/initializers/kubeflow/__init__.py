"""The Kubeflow side: the SDK's initializer classes on the programs' own schema (`sdk`), what runs them elsewhere
(`specs`: docker/podman arguments, Kubernetes init containers) and a local runner that starts both programs, as
processes or images (`runner`).

May import every floor below; never what runs inside the programs (`run`, the transfer), only the schema and the
composition root's stores (`initializers.sources`).
"""
