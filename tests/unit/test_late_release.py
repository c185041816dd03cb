"""LateRelease: finished BLS response iterators are dropped by Python only after `hold_s`
(model_repository/triton/late_release.py says why)."""

import gc
import weakref

from model_repository.triton.late_release import LateRelease


class Held:
    pass


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_an_object_is_dropped_only_after_its_hold_and_on_a_later_hold():
    clock = Clock()
    late = LateRelease(hold_s=10.0, clock=clock)
    first = Held()
    ref = weakref.ref(first)
    late.hold(first)
    del first
    gc.collect()
    assert ref() is not None and len(late) == 1
    clock.now += 9.9
    late.hold(Held())
    assert ref() is not None and len(late) == 2  # not yet 10 s
    clock.now += 0.2
    late.hold(Held())
    assert ref() is None and len(late) == 2  # dropped by that hold, the two later ones kept


def test_objects_are_dropped_outside_the_lock():
    """A dropped object's finalizer may take the same path again (a response iterator's
    destructor runs Python-backend code): the lock is not held while it runs."""
    late = LateRelease(hold_s=0.0)
    seen = []

    class Reentrant:
        def __del__(self):
            seen.append(len(late))  # takes the lock: a drop under it would deadlock

    late.hold(Reentrant())
    late.hold(Held())
    assert seen == [0] or seen == [1]


def test_release_all_drops_everything():
    late = LateRelease(hold_s=60.0)
    kept = Held()
    ref = weakref.ref(kept)
    late.hold(kept)
    del kept
    late.release_all()
    assert ref() is None and len(late) == 0
