"""Caches of plans: a thread-safe LRU cache (einsum's, keyed by expression, layouts and
options), and :func:`cached_plans` for functions that build plans.  Each plan keeps the
backend chosen when it was made, so the caches empty themselves when the registered
backends change (:func:`tenalg.seam.on_change`).

>>> cache = PlanCache(maxsize=2)
>>> cache.put("a", 1), cache.put("b", 2), cache.put("c", 3), cache.get("a")
(1, 2, 3, None)
"""

import collections
import functools
import threading

from .seam import generation, on_change


def cached_plans(maxsize):
    """``functools.lru_cache(maxsize)`` for a function that builds plans (or what keeps
    them), emptied whenever a backend is registered or removed, and not keeping what was
    built while one was (:func:`tenalg.seam.generation`).

    >>> @cached_plans(8)
    ... def plan(shape):
    ...     return object()
    >>> plan((2,)) is plan((2,))
    True
    """
    def decorate(function):
        cached = functools.lru_cache(maxsize)(function)
        on_change(cached.cache_clear)

        @functools.wraps(function)
        def kept(*args):
            before = generation()
            result = cached(*args)
            if generation() != before:  # made from a registry that changed meanwhile
                cached.cache_clear()
            return result

        kept.cache_clear = cached.cache_clear
        return kept
    return decorate


class PlanCache:
    """A thread-safe LRU cache of plans (einsum's, and the front ends' calls)."""

    def __init__(self, maxsize=256):
        self.maxsize = maxsize
        self._plans = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        """The plan cached under ``key``, now the most recently used, or None.  Below half
        full the cache keeps its order of insertion (nothing is evicted soon) and a hit
        skips the reordering, which hashes the key again: 0.7 us of an einsum of 10 us."""
        plan = self._plans.get(key)  # a hit needs no lock: each dict call is atomic
        if plan is not None and 2 * len(self._plans) >= self.maxsize:
            try:  # noqa: SIM105 - contextlib.suppress costs 0.8 us a hit, try 0.1 us
                self._plans.move_to_end(key)
            except KeyError:  # another thread evicted it meanwhile
                pass
        return plan

    def build(self, key, make):
        """``make()``, cached under ``key`` unless the backends changed while it ran
        (:func:`tenalg.seam.generation`)."""
        before = generation()
        plan = self.put(key, make())
        if generation() != before:
            with self._lock:
                self._plans.pop(key, None)
        return plan

    def put(self, key, plan):
        """Cache ``plan`` under ``key``, evicting the least recently used; returns it."""
        with self._lock:
            self._plans[key] = plan
            while len(self._plans) > self.maxsize:
                self._plans.popitem(last=False)
        return plan

    def clear(self):
        with self._lock:
            self._plans.clear()

    def __len__(self):
        return len(self._plans)
