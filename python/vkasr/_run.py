"""Running a C call so that Ctrl-C stops it: the call runs on a worker thread while the main thread waits
(and so handles signals); on KeyboardInterrupt the call's abort flag is set, the call returns at its next
abort poll, and KeyboardInterrupt is raised again."""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from . import _lib


class AbortFlag:
    """What the C abort callback reads: set by Ctrl-C, by a failing Python callback, or by the caller's
    `abort` event. The ctypes callback stays referenced here for as long as the call runs."""

    def __init__(self, event: Any = None) -> None:
        self.interrupted = False
        self.error: Optional[BaseException] = None  # an exception a Python callback raised
        self.event = event
        self.callback = _lib.AbortCallback(self._poll)

    def _poll(self, _user: Any) -> bool:
        return self.interrupted or self.error is not None or (self.event is not None and self.event.is_set())


def run(fn: Callable[[], Any], flag: AbortFlag, on_interrupt: Optional[Callable[[], None]] = None) -> Any:
    """fn() on a worker thread when called on the main thread (where signals are handled), directly
    otherwise. KeyboardInterrupt (or another exception a signal handler raises) sets flag.interrupted,
    calls on_interrupt(), waits for fn to return and is re-raised; the session fn used is then free."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: dict = {}
    # An Event, not Thread.join/is_alive: in Python 3.11 a join interrupted by a signal can mark a thread
    # that is still running as stopped.
    done = threading.Event()

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, name="vkasr-call", daemon=True).start()
    try:
        # Timed waits: a signal delivered to another thread is handled here within one wait.
        while not done.wait(0.05):
            pass
    except BaseException:
        flag.interrupted = True
        if on_interrupt is not None:
            on_interrupt()
        while not done.is_set():
            try:
                done.wait(0.05)
            except KeyboardInterrupt:  # a second Ctrl-C: the call is already stopping
                pass
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]
