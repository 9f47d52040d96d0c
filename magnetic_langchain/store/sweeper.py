"""A background thread that deletes expired store items at a fixed interval."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from magnetic_core.errors import MagneticError

__all__ = ["Sweeper"]

logger = logging.getLogger(__name__)


class Sweeper:
    """Calls ``sweep`` every ``interval`` seconds until stopped.

    Args:
        sweep: the function that deletes expired items and returns how many.
    """

    def __init__(self, sweep: Callable[[], int]) -> None:
        self._sweep = sweep
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, interval: float) -> None:
        """Start sweeping (a running sweeper is left as it is)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(interval,), name="magnetic-ttl-sweeper", daemon=True
        )
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                deleted = self._sweep()
            except MagneticError as e:  # a closed store or a failing substrate: stop
                logger.warning("the TTL sweep failed, the sweeper stops: %s", e)
                return
            if deleted:
                logger.debug("TTL sweep deleted %d expired items", deleted)

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to stop and wait up to ``timeout`` seconds; True once stopped."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return not self.running
