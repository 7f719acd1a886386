"""The Kubeflow side: the SDK's initializer classes on the programs' own schema (`sdk`) and a local runner that
starts both programs, as processes or images (`runner`).

May import `common`, `config` and `process`; it never imports what runs inside the programs.
"""
