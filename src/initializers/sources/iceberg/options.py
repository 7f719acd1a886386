"""The cache:// source's own settings, as Kubeflow's data cache initializer sends them; it also reads `AwsOptions`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from initializers.config.settings import POSITIVE_INT, group_field, setting_field, values_of

_RECORDED_ONLY = "Accepted from Kubeflow and recorded; not needed."


@dataclass(frozen=True)
class KubeflowCacheCluster:
    """What Kubeflow sends for the cache cluster it would start: recorded in the manifest, not needed here."""

    head_cpu: str | None = setting_field("HEAD_CPU", _RECORDED_ONLY)
    head_mem: str | None = setting_field("HEAD_MEM", _RECORDED_ONLY)
    worker_cpu: str | None = setting_field("WORKER_CPU", _RECORDED_ONLY)
    worker_mem: str | None = setting_field("WORKER_MEM", _RECORDED_ONLY)
    train_job_name: str | None = setting_field("TRAIN_JOB_NAME", _RECORDED_ONLY)
    cache_image: str | None = setting_field("CACHE_IMAGE", _RECORDED_ONLY)
    readiness_initial_delay_seconds: str | None = setting_field("READINESS_INITIAL_DELAY_SECONDS", _RECORDED_ONLY)
    readiness_period_seconds: str | None = setting_field("READINESS_PERIOD_SECONDS", _RECORDED_ONLY)
    readiness_timeout_seconds: str | None = setting_field("READINESS_TIMEOUT_SECONDS", _RECORDED_ONLY)
    readiness_failure_threshold: str | None = setting_field("READINESS_FAILURE_THRESHOLD", _RECORDED_ONLY)
    cache_ready_timeout_seconds: int | None = setting_field(
        "CACHE_READY_TIMEOUT_SECONDS",
        "Kubeflow's bound on waiting for its cache cluster, in whole seconds; checked and recorded: no cluster is "
        "started or awaited.",
        POSITIVE_INT,
    )

    def recorded(self) -> dict[str, Any]:
        """The values Kubeflow sent, as the manifest records them (those not sent left out)."""
        return {name: value for name, value in values_of(self).items() if value is not None}


@dataclass(frozen=True)
class CacheOptions:
    metadata_loc: str | None = setting_field("METADATA_LOC", "Iceberg table metadata JSON (s3://... or a local path).")
    cluster_size: int | None = setting_field("CLUSTER_SIZE", "Data nodes + 1, as Kubeflow sends it.", POSITIVE_INT)
    num_data_nodes: int | None = setting_field("NUM_DATA_NODES", "Number of data nodes (at least 2).", POSITIVE_INT)
    iam_role: str | None = setting_field("IAM_ROLE", "IAM role to assume for reading the Iceberg table.")
    kubeflow: KubeflowCacheCluster = group_field(KubeflowCacheCluster)
