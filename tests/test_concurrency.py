"""The ramp that decides how many transfers run at once: pure logic, fed with made-up measurements."""

from __future__ import annotations

from devkit.driven_clock import DrivenClock
from initializers.store.contract import PART_SIZE
from initializers.store.round_trips import RoundTrips
from initializers.store.throttle import Throttle
from initializers.transfer.concurrency import (
    BASE_REQUESTS,
    MAX_PART_SIZE,
    NO_REQUESTS,
    REQUESTS_PER_SECOND,
    Latency,
    Ramp,
)


def feed(ramp: Ramp, throughput_of: dict[int, float], windows: int, cpu_share: float = 0.2) -> list[int]:
    """Windows whose throughput depends only on the limit in force; the limits chosen, in order."""
    chosen = []
    for _ in range(windows):
        chosen.append(ramp.observe(throughput_of[ramp.limit], cpu_share))
    return chosen


def test_doubles_while_throughput_follows_and_stops_where_it_flattens():
    # A link of capped connections: throughput grows with connections up to 32, then stays.
    ramp = Ramp(8, 64)
    limits = feed(ramp, {8: 64.0, 16: 128.0, 32: 250.0, 64: 260.0}, 4)
    assert limits[:3] == [16, 32, 64]
    assert ramp.limit == 32  # 64 gained under 15%: back to 32, which did as well for fewer connections


def test_never_exceeds_the_cap_and_starts_within_it():
    assert Ramp(8, 3).limit == 3
    ramp = Ramp(8, 20)
    assert feed(ramp, {8: 1.0, 16: 2.0, 20: 4.0}, 5) == [16, 20, 20, 20, 20]


def test_a_busy_cpu_means_no_growth_and_fewer_streams_while_fewer_do_as_well():
    # Loopback over TLS: our CPU is the limit, and threads handing the interpreter's lock between cores at every
    # record cost more than they deliver: half the streams move more, down to the level where halving loses.
    ramp = Ramp(8, 64)
    limits = feed(ramp, {8: 400e6, 4: 450e6, 2: 500e6, 1: 300e6}, 20, cpu_share=0.95)
    assert limits[:4] == [4, 2, 1, 2]  # 1 stream moved less than 2: back to 2, and there it stays
    # Never halved again once halving lost; more streams are tried at once, then now and then, judged by throughput.
    assert limits[4:] == [4, 2] + [2] * 7 + [4, 2] + [2] * 5


def test_capped_connections_are_not_halved_for_a_busy_cpu():
    # A link of connections capped at 8 MB/s, over TLS, the CPU busy with their bytes: a range lasts a second, and the
    # network, not the CPU, is the limit. More streams are tried as with the CPU to spare.
    ramp = Ramp(16, 64)
    limits = feed(ramp, {16: 128e6, 32: 250e6, 64: 260e6}, 4, cpu_share=0.6)
    assert limits == [32, 64, 32, 32]


def test_fast_streams_that_lose_when_halved_are_grown_next():
    # Fast connections with the CPU busy: half the streams deliver half, so the streams are the limit after all.
    ramp = Ramp(16, 64)
    limits = feed(ramp, {16: 800e6, 8: 400e6, 32: 1000e6, 64: 1050e6}, 6, cpu_share=0.6)
    assert limits[:5] == [8, 16, 32, 64, 32]


def test_a_halving_is_judged_once_the_transfers_above_it_have_finished():
    # Half the streams seem to deliver as much while the other half finish the ranges they hold. The first window
    # without them judges the halving.
    ramp = Ramp(16, 64)
    assert ramp.observe(800e6, 0.9, running=16) == 8  # busy: half are tried
    assert ramp.observe(800e6, 0.9, running=16) == 8  # the 8 above the limit still finishing their ranges
    assert ramp.observe(600e6, 0.9, running=8) == 8  # the window they ended in: part theirs, not judged
    assert ramp.observe(400e6, 0.9, running=8) == 16  # half delivered half: back to all


def test_fewer_streams_are_kept_only_when_they_deliver_as_much():
    ramp = Ramp(8, 64)
    feed(ramp, {8: 400e6, 4: 400e6, 2: 396e6}, 3, cpu_share=0.95)
    assert ramp.limit == 4  # 4 did as well as 8 for less; 2 did a little less


def test_a_single_stream_is_never_halved():
    ramp = Ramp(1, 64)
    assert feed(ramp, {1: 100e6}, 10, cpu_share=0.95) == [1] * 10


def test_a_doubling_that_does_not_pay_is_undone_and_probed_again_later():
    ramp = Ramp(8, 64)
    limits = feed(ramp, {8: 100.0, 16: 80.0}, 10)
    assert limits[0] == 16 and limits[1] == 8
    assert 16 in limits[2:]  # tried again after a while: the regime may have changed
    assert limits[2:].index(16) >= 6


def test_no_growth_while_nothing_arrives():
    # Waiting for a listing, or for the first bytes: nothing to measure a doubling against.
    ramp = Ramp(8, 64)
    assert feed(ramp, {8: 0.0}, 10) == [8] * 10


KiB, MiB = 1 << 10, 1 << 20


def test_part_sized_tasks_run_one_per_stream_and_smaller_ones_many_per_stream():
    ramp = Ramp(8, 64)
    assert ramp.workers == 8  # nothing started yet: tasks are taken to be a part each
    for _ in range(100):
        ramp.task_started(PART_SIZE)
    assert ramp.workers == 8
    for _ in range(100):
        ramp.task_started(2 * MiB)
    assert ramp.workers == 8 * 4
    for _ in range(100):
        ramp.task_started(64 * KiB)
    assert ramp.workers == 64  # round trips bound them, not bytes: as many as the cap allows


def test_the_cap_holds_whatever_the_task_size():
    ramp = Ramp(8, 2)
    for _ in range(100):
        ramp.task_started(1 * KiB)
    assert ramp.workers == 2


def test_the_workers_follow_the_tasks_from_small_files_to_a_large_files_ranges():
    ramp = Ramp(8, 64)
    for _ in range(1000):
        ramp.task_started(3 * KiB)  # a repository's small files, listed first
    assert ramp.workers == 64
    ranges = 0
    while ramp.workers > 8:
        ramp.task_started(PART_SIZE)
        ranges += 1
    assert ranges <= 40  # a large file's first few ranges bring it back to one transfer per stream


def test_capped_connections_get_the_smallest_ranges():
    # A real network: 8 connections of 8 MB/s each. Small ranges spread a file over many of them.
    ramp = Ramp(8, 64)
    ramp.observe(8 * 8e6, 0.2)
    assert ramp.part_size == PART_SIZE


def test_many_small_files_at_once_are_not_taken_for_fast_connections():
    ramp = Ramp(8, 64)
    for _ in range(100):
        ramp.task_started(64 * KiB)
    ramp.observe(400e6, 0.9)  # 400 MB/s, but over 64 connections: 6 MB/s each
    assert ramp.part_size == PART_SIZE


def test_fast_connections_get_larger_ranges_in_whole_mib_up_to_the_largest():
    ramp = Ramp(8, 64)
    ramp.observe(8 * 100e6, 0.9)  # loopback: each connection moves 100 MB/s
    assert PART_SIZE < ramp.part_size < MAX_PART_SIZE and ramp.part_size % MiB == 0
    ramp.observe(8 * 2e9, 0.9)
    assert ramp.part_size == MAX_PART_SIZE


def test_a_window_with_nothing_delivered_keeps_the_range_size():
    ramp = Ramp(8, 64)
    ramp.observe(8 * 100e6, 0.9)
    sized = ramp.part_size
    ramp.observe(0.0, 0.1)  # waiting for the next listing page
    assert ramp.part_size == sized


def small_files(ramp: Ramp, size: int = 64 * KiB) -> Ramp:
    for _ in range(100):
        ramp.task_started(size)
    return ramp


def test_small_files_start_at_the_base_number_of_requests():
    assert small_files(Ramp(8, 256)).workers == BASE_REQUESTS
    assert small_files(Ramp(8, 8)).workers == 8  # a lower cap holds from the start


ROUND_TRIP = Latency(waiting_share=0.8, request_seconds=0.1)  # waiting for the first byte takes most of a request


def test_latency_bound_small_files_grow_toward_the_cap_in_a_few_windows():
    # A long round trip: requests take as long however many are in flight, and the CPU is idle.
    ramp = small_files(Ramp(8, 256))
    seen = []
    for _ in range(4):
        ramp.observe(ramp.workers * 0.3e6, 0.2, ROUND_TRIP)
        seen.append(ramp.workers)
    assert seen == [128, 256, 256, 256]


def test_a_doubling_of_requests_judged_only_once_some_of_them_finished():
    ramp = small_files(Ramp(8, 256))
    ramp.observe(20e6, 0.2, ROUND_TRIP)
    ramp.observe(20e6, 0.2, NO_REQUESTS)  # a round trip longer than a window: no request finished yet
    assert ramp.workers == 128
    ramp.observe(40e6, 0.2, ROUND_TRIP)
    assert ramp.workers == 256


def test_requests_that_queue_once_doubled_are_brought_back_for_good():
    # A busy server: requests wait there, not on the round trip; twice as many take twice as long.
    ramp = small_files(Ramp(8, 256))
    seen = []
    for _ in range(10):
        seconds = 0.05 * ramp.workers / BASE_REQUESTS
        ramp.observe(20e6, 0.3, Latency(0.9, seconds))
        seen.append(ramp.workers)
    assert seen == [128] + [BASE_REQUESTS] * 9


def test_requests_grow_while_they_do_not_queue_and_stop_where_they_do():
    ramp = small_files(Ramp(8, 256))
    seconds_at = {64: 0.1, 128: 0.11, 256: 0.2}  # the server saturates between 128 and 256
    for _ in range(6):
        ramp.observe(20e6, 0.2, Latency(0.8, seconds_at[ramp.workers]))
    assert ramp.workers == 128


def test_latency_bound_requests_never_exceed_a_lower_cap():
    ramp = small_files(Ramp(8, 100))
    for _ in range(10):
        ramp.observe(20e6, 0.2, ROUND_TRIP)
    assert ramp.workers == 100
    low = small_files(Ramp(8, 8))
    for _ in range(10):
        low.observe(20e6, 0.2, ROUND_TRIP)
    assert low.workers == 8


def test_requests_stay_put_where_the_cpu_is_the_limit_or_bytes_dominate():
    # Loopback: the CPU is busy whatever waits; or a request's time goes mostly into its body's bytes.
    busy = small_files(Ramp(8, 256))
    bytes_bound = small_files(Ramp(8, 256))
    idle = small_files(Ramp(8, 256))
    for _ in range(10):
        busy.observe(200e6, 0.9, ROUND_TRIP)
        bytes_bound.observe(20e6, 0.2, Latency(0.3, 0.1))
        idle.observe(0.0, 0.05, NO_REQUESTS)  # waiting for the listing: nothing to judge by
    assert busy.workers == bytes_bound.workers == idle.workers == BASE_REQUESTS


def test_latency_leaves_large_files_streams_to_the_throughput_ramp():
    ramp = Ramp(8, 256)
    for _ in range(100):
        ramp.task_started(PART_SIZE)
    ramp.observe(64e6, 0.2, ROUND_TRIP)
    assert ramp.workers == ramp.limit == 16  # the usual doubling, one part per stream
    assert ramp.requests == BASE_REQUESTS


def test_requests_that_lower_throughput_once_doubled_are_brought_back_for_good():
    # More threads than the CPU's share affords: each request takes as long, yet fewer finish.
    ramp = small_files(Ramp(8, 256))
    ramp.observe(20e6, 0.3, ROUND_TRIP)
    assert ramp.workers == 128
    ramp.observe(15e6, 0.3, ROUND_TRIP)
    assert ramp.workers == BASE_REQUESTS
    ramp.observe(20e6, 0.3, ROUND_TRIP)
    assert ramp.workers == BASE_REQUESTS


def round_trips_of(*seconds: float) -> RoundTrips:
    measured = RoundTrips()
    for each in seconds:
        measured.add(each)
    return measured


def test_the_first_small_file_requests_follow_the_round_trip_the_listing_measured():
    # Little's law: REQUESTS_PER_SECOND kept going over each request's two round trips on a new connection.
    assert Ramp(8, 64, 256, round_trips=round_trips_of(0.08, 0.05)).follow_round_trip() == 100
    assert Ramp(8, 64, 256, round_trips=round_trips_of(0.05)).workers == 8  # nothing started: part-sized tasks
    ramp = Ramp(8, 64, 256, round_trips=round_trips_of(0.05))
    ramp.follow_round_trip()
    ramp.task_started(64 * KiB)  # the first task of a listing of small files: all the requests at once
    assert ramp.workers == 100 == 2 * REQUESTS_PER_SECOND * 0.05
    # Loopback: a round trip of a fraction of a millisecond leaves the base; none measured, likewise.
    assert Ramp(8, 64, 256, round_trips=round_trips_of(0.0003)).follow_round_trip() == BASE_REQUESTS
    assert Ramp(8, 64, 256, round_trips=RoundTrips()).follow_round_trip() == BASE_REQUESTS


def test_the_round_trip_never_takes_requests_past_their_cap_nor_streams_past_theirs():
    assert Ramp(8, 64, 256, round_trips=round_trips_of(0.2)).follow_round_trip() == 256  # 400 called for
    assert Ramp(8, 100, round_trips=round_trips_of(0.2)).follow_round_trip() == 100  # MAX_WORKERS=100 caps both
    ramp = Ramp(8, 64, 256)
    assert feed(ramp, {8: 1.0, 16: 2.0, 32: 4.0, 64: 8.0}, 5)[-1] == 64  # streams: their own cap


def test_a_shorter_round_trip_lowers_what_the_round_trip_raised_and_nothing_else():
    measured = round_trips_of(0.1)  # a loaded server's listing page: its own work looks like a round trip
    ramp = Ramp(8, 64, 256, round_trips=measured)
    assert ramp.follow_round_trip() == 200
    measured.add(0.04)  # a GET answered sooner
    assert ramp.follow_round_trip() == 80
    measured.add(0.001)  # loopback after all
    assert ramp.follow_round_trip() == BASE_REQUESTS
    doubled = small_files(Ramp(8, 256, round_trips=round_trips_of(0.001)))
    doubled.follow_round_trip()
    doubled.observe(1e6, 0.1, ROUND_TRIP)  # latency-bound: a doubling, which the round trip does not undo
    assert doubled.requests == 2 * BASE_REQUESTS and doubled.follow_round_trip() == 2 * BASE_REQUESTS


def test_after_throttling_the_round_trip_no_longer_raises_requests():
    throttle = Throttle(DrivenClock())
    ramp = Ramp(8, 64, 256, throttle=throttle, round_trips=round_trips_of(0.1))
    throttle.throttled(None)
    ramp.observe(100e6, 0.1)  # halved from the base: the server set the pace, not the round trip's 256
    assert ramp.requests == BASE_REQUESTS // 2 and ramp.follow_round_trip() == BASE_REQUESTS // 2
