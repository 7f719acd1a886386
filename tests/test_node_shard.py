"""SHARD_INDEX's two readings, each owned by its side: a share of a split plan (`Config.shard`, hf:// and s3://) and
the cache's one data-node shard (`iceberg.node_shard`), with JOB_COMPLETION_INDEX standing in for it in both."""

from __future__ import annotations

import pytest

from initializers.common.errors import ConfigError
from initializers.config.contract import Config
from initializers.sources import DATASET
from initializers.sources.iceberg.options import CacheOptions
from initializers.sources.iceberg.source import data_nodes, node_shard


def config(**env: str) -> Config:
    return Config.from_env(env, kind=DATASET)


def test_the_cache_reads_shard_index_as_its_own_shard_of_the_data_nodes():
    assert node_shard(config(NUM_DATA_NODES="3"), 3) is None  # every shard
    assert node_shard(config(SHARD_INDEX="2"), 3) == 2  # no SHARD_COUNT needed: the data nodes are the count
    assert node_shard(config(SHARD_COUNT="3", JOB_COMPLETION_INDEX="1"), 3) == 1
    assert node_shard(config(JOB_COMPLETION_INDEX="1"), 3) is None  # alone, the job's index splits nothing


def test_the_cache_refuses_a_shard_it_does_not_have_and_a_count_that_disagrees():
    with pytest.raises(ConfigError, match="SHARD_INDEX=3 is out of range: 3 shards are numbered 0 to 2"):
        node_shard(config(SHARD_INDEX="3"), 3)
    with pytest.raises(ConfigError, match="SHARD_COUNT=4, but the table is sharded for 3 data nodes"):
        node_shard(config(SHARD_INDEX="0", SHARD_COUNT="4"), 3)
    with pytest.raises(ConfigError, match="SHARD_COUNT is set but SHARD_INDEX is not"):
        node_shard(config(SHARD_COUNT="3"), 3)


def test_a_split_plan_needs_shard_count_whatever_the_cache_accepts():
    assert config(SHARD_INDEX="1", SHARD_COUNT="2").shard() == (1, 2)
    assert config(SHARD_COUNT="4", JOB_COMPLETION_INDEX="3").shard() == (3, 4)
    assert config(NUM_DATA_NODES="3").shard() is None
    with pytest.raises(ConfigError, match="SHARD_INDEX is set but SHARD_COUNT is not"):
        config(SHARD_INDEX="1").shard()


@pytest.mark.parametrize(
    ("env", "expected"),
    [({"NUM_DATA_NODES": "3"}, 3), ({"CLUSTER_SIZE": "5"}, 4), ({"CLUSTER_SIZE": "4", "NUM_DATA_NODES": "3"}, 3)],
)
def test_data_nodes_from_num_data_nodes_or_kubeflows_cluster_size(env: dict[str, str], expected: int):
    assert data_nodes(config(**env).options(CacheOptions)) == expected


def test_data_nodes_must_be_given_and_at_least_two():
    with pytest.raises(ConfigError, match="NUM_DATA_NODES is not set"):
        data_nodes(config().options(CacheOptions))
    with pytest.raises(ConfigError, match="CLUSTER_SIZE=2: the cache source needs at least 2 data nodes, got 1"):
        data_nodes(config(CLUSTER_SIZE="2").options(CacheOptions))
