"""Iterators run in threads of their own, a bounded number of items ahead of whoever consumes them.

The listing goes on while files transfer: the first file starts as soon as it is listed, and the transfer
threads never wait on a listing page while the listing is ahead of them; the bound keeps memory flat.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")
_END = object()


class Lookahead(Generic[_T]):
    """Items travel in batches (a queue operation per item costs more lock traffic than its work); all iterators feed
    the one bounded queue at once, their items in the order ready, none waiting for another to be consumed."""

    def __init__(
        self,
        producers: Sequence[Iterator[_T]],
        depth: int,
        name: str,
        batch: int = 64,
        stop: threading.Event | None = None,
        check_stop: Callable[[], None] | None = None,
    ) -> None:
        """`stop`: an event whose setting closes this lookahead (a failing run's), as `close` does; `check_stop`: called
        while a consumer waits for items, raising to end the wait (a stopped run's `Stop.check`)."""
        self._queue: queue.Queue[object] = queue.Queue(max(1, depth // batch))
        self._batch = batch
        self._current: Iterator[_T] = iter(())
        self._closed = stop or threading.Event()
        self._check_stop = check_stop or (lambda: None)
        self._error: BaseException | None = None
        self._running = len(producers)
        self._returned: list[Any] = [None] * len(producers)
        self._threads = [
            threading.Thread(target=self._produce, args=(producer, index), name=f"{name}-{index}", daemon=True)
            for index, producer in enumerate(producers)
        ]
        for thread in self._threads:
            thread.start()

    def __iter__(self) -> Iterator[_T]:
        return self

    def __next__(self) -> _T:
        """The next item; StopIteration at the end, or within a poll once closed (the consumer is going away, and a
        producer may wait on a listing that never answers); a producer's exception, raised as soon as it failed."""
        for item in self._current:
            return item
        while self._running and not self._closed.is_set():
            self._check_stop()
            try:
                batch = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if batch is _END:
                self._running -= 1
                if self._error is not None:
                    break
                continue
            self._current = iter(batch)  # type: ignore[call-overload]
            return next(self._current)
        if self._error is not None:
            raise self._error
        raise StopIteration

    def returned(self) -> list[Any]:
        """What each producer returned (a generator's return value; None for other iterators), in the order given;
        for use once this lookahead has been consumed to its end."""
        assert not self._running, "the producers have not all ended"
        return list(self._returned)

    def close(self, grace: float = 1.0) -> bool:
        """Stop the producers at their next item, waiting up to `grace` seconds for them to end; True when they all
        have, so that what they use may be closed. (Daemon threads: one blocked in the network does not hold the
        process, nor is it waited for beyond the grace.)"""
        self._closed.set()
        deadline = time.monotonic() + grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _produce(self, items: Iterator[_T], index: int) -> None:
        batch: list[_T] = []
        try:
            while True:
                try:
                    item = next(items)
                except StopIteration as end:
                    self._returned[index] = end.value
                    break
                batch.append(item)
                # A batch goes when full, or at once while the consumer waits: the first file starts as soon as listed.
                if len(batch) == self._batch or self._queue.empty():
                    if not self._put(batch):
                        return
                    batch = []
        except BaseException as exc:  # handed to the consumer, raised in its thread
            if self._error is None:
                self._error = exc
        if batch:
            self._put(batch)
        self._put(_END)

    def _put(self, item: object) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False
