"""Harness.time_many(cold=True): every timed call comes alone, right after an eviction read, so
no implementation inherits another's cache contents, in rounds whose order rotates; hot=True:
blocks of back-to-back calls per function after an untimed one; neither: fast calls are
looped."""
import time

from pytpp.benchmarks._harness import Harness

PEAKS = {1: {"f64": 1.0, "f32": 1.0, "copy_gbs": 1.0, "read_gbs": 1.0}}


def _recording_harness(events):
    h = Harness((1,), quick=True, repeats=3, out=lambda line: None, peaks=PEAKS)
    h._evict = lambda: events.append("evict")
    return h


def test_cold_samples_follow_an_eviction_one_call_each():
    events = []
    h = _recording_harness(events)
    fns = [lambda: events.append("a"), lambda: events.append("b")]
    timings = h.time_many(fns, warmup=1, cold=True)
    assert len(timings) == 2 and all(0 <= best <= med for med, best in timings)
    timed = events[events.index("evict"):]          # after the warm-up calls
    # each round starts one function later: no function always follows the same other one
    assert timed == ["evict", "a", "evict", "b", "evict", "b", "evict", "a",
                     "evict", "a", "evict", "b"]


def test_warm_samples_loop_fast_calls_without_evicting():
    events = []
    h = _recording_harness(events)
    h.time_many([lambda: events.append("a")], warmup=1)
    assert "evict" not in events and len(events) > 1 + 3


def test_evict_reads_a_buffer_beyond_the_last_level_cache():
    h = Harness((1,), quick=True, peaks=PEAKS)
    h._evict()
    assert h._evict_buf.nbytes >= 64 << 20


def test_hot_samples_come_in_blocks_after_an_untimed_call():
    events = []
    h = _recording_harness(events)

    def slow(tag):          # 0.1 ms: one call per sample
        return lambda: (time.sleep(1e-4), events.append(tag))
    fns = [slow("a"), slow("b")]
    h.time_many(fns, repeats=3, warmup=1, hot=True)
    # warm-up a, b; then per round each function: one untimed call and a block of 3 samples
    assert events == ["a", "b"] + (["a"] * 4 + ["b"] * 4)
