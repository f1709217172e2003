"""pytpp.loops: every grammar feature against a reference of the iteration order written out
by hand from 001's listings (which indices each thread visits, in which order, and where the
barriers fall), and the malformed strings."""
import threading

import pytest

from pytpp.loops import LoopSpec, ThreadedLoop, parse, thread_num


def run(loop):
    """{thread: [index tuples, in order]} of a Python body; the C engine's nest (a C body
    recording them) must visit the same, except under dynamic schedules (checked apart)."""
    got = run_python(loop)
    if loop.parsed.schedule == "static":
        assert loop.trace() == got
    return got


def run_python(loop):
    seen = {}
    lock = threading.Lock()

    def body(ind):
        with lock:
            seen.setdefault(thread_num(), []).append(tuple(ind))

    loop(body)
    return seen


def split(n, parts, i):
    base, extra = divmod(n, parts)
    start = i * base + min(i, extra)
    return start, start + base + (i < extra)


# 001 Listing 2's GEMM loops: a = K (Kb = 4), b = M (Mb = 8), c = N (Nb = 4)
KB, MB, NB = 4, 8, 4
K_STEP, M_STEP, N_STEP = 1, 1, 1
L1_M, L0_M, L1_N = 4, 2, 2
SPECS = [LoopSpec(0, KB, K_STEP), LoopSpec(0, MB, M_STEP, [L1_M, L0_M]),
         LoopSpec(0, NB, N_STEP, [L1_N])]


def test_listing2_sequential_order():
    """'bcacbc'-like blocking on one thread: the nest written out as plain loops."""
    ref = []
    for b0 in range(0, MB, L1_M):
        for c0 in range(0, NB, L1_N):
            for a0 in range(0, KB, K_STEP):
                for b1 in range(b0, b0 + L1_M, L0_M):
                    for c1 in range(c0, c0 + L1_N, N_STEP):
                        for b2 in range(b1, b1 + L0_M, M_STEP):
                            ref.append((a0, b2, c1))
    got = run(ThreadedLoop(SPECS, "bcabcb", num_threads=2))
    assert got == {0: ref}   # no parallel loop: the nest runs once, on one thread


@pytest.mark.parametrize("nt", [1, 2, 3, 5])
def test_listing2_collapsed_static(nt):
    """'bcaBCb': every thread runs b0, c0, a0; the (b1, c1) pairs of each instance of the
    collapsed loop are dealt out in contiguous blocks (OpenMP static), b2 inside."""
    ref = {t: [] for t in range(nt)}
    for b0 in range(0, MB, L1_M):
        for c0 in range(0, NB, L1_N):
            for a0 in range(0, KB, K_STEP):
                space = [(b1, c1) for b1 in range(b0, b0 + L1_M, L0_M)
                         for c1 in range(c0, c0 + L1_N, N_STEP)]
                for t in range(nt):
                    lo, hi = split(len(space), nt, t)
                    for b1, c1 in space[lo:hi]:
                        for b2 in range(b1, b1 + L0_M, M_STEP):
                            ref[t].append((a0, b2, c1))
    got = run(ThreadedLoop(SPECS, "bcaBCb", num_threads=nt))
    assert {t: v for t, v in got.items() if v} == {t: v for t, v in ref.items() if v}


def test_static_chunks_round_robin():
    nt, chunk = 3, 2
    loop = ThreadedLoop([LoopSpec(0, 11)], "A @ schedule(static, 2)", num_threads=nt)
    got = run(loop)
    for t in range(nt):
        want = [(i,) for c0 in range(t * chunk, 11, nt * chunk) for i in range(c0, min(c0 + chunk, 11))]
        assert got.get(t, []) == want


@pytest.mark.parametrize("sched", ["dynamic, 1", "dynamic, 3", "dynamic", "guided",
                                   "guided, 2"])
def test_dynamic_schedules_cover_once_in_order(sched):
    """Dynamic: each iteration once; each thread's iterations in increasing order; a chunk is
    contiguous."""
    loop = ThreadedLoop(SPECS, f"bcaBCb @ schedule({sched})", num_threads=3)
    for got in (run(loop), loop.trace()):
        allv = sorted(v for vs in got.values() for v in vs)
        assert allv == sorted((a, b, c) for a in range(KB) for b in range(MB) for c in range(NB))


def test_listing3_thread_grid():
    """'bC{R:2}aB{C:2}cb': a 2 x 2 grid; c0 split in 2 blocks by row id, b1 in 2 by col id."""
    R, C = 2, 2
    ref = {t: [] for t in range(R * C)}
    for t in range(R * C):
        row, col = t // C, t % C
        for b0 in range(0, MB, L1_M):
            c0s = list(range(0, NB, L1_N))
            lo, hi = split(len(c0s), R, row)
            for c0 in c0s[lo:hi]:
                for a0 in range(0, KB, K_STEP):
                    b1s = list(range(b0, b0 + L1_M, L0_M))
                    lo1, hi1 = split(len(b1s), C, col)
                    for b1 in b1s[lo1:hi1]:
                        for c1 in range(c0, c0 + L1_N, N_STEP):
                            for b2 in range(b1, b1 + L0_M, M_STEP):
                                ref[t].append((a0, b2, c1))
    loop = ThreadedLoop(SPECS, "bC{R:2}aB{C:2}cb")
    assert loop.num_threads == 4
    assert run(loop) == ref


def test_grid_one_dimension_uneven():
    loop = ThreadedLoop([LoopSpec(0, 7), LoopSpec(0, 2)], "A{R:3}b")
    got = run(loop)
    assert got == {0: [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)],
                   1: [(3, 0), (3, 1), (4, 0), (4, 1)], 2: [(5, 0), (5, 1), (6, 0), (6, 1)]}


def test_barriers_separate_phases():
    """'aB|c' on 3 threads: the barrier after the collapsed loop B holds every thread until
    all have finished their share for this a, so no thread runs ahead into the next a."""
    log = []
    lock = threading.Lock()

    def body(ind):
        with lock:
            log.append((ind[0], thread_num()))

    loop = ThreadedLoop([LoopSpec(0, 3), LoopSpec(0, 6), LoopSpec(0, 2)], "aB|c",
                        num_threads=3)
    loop(body)
    phases = [a for a, _ in log]
    assert phases == sorted(phases)   # no thread ran ahead into the next a iteration
    assert len(log) == 36


def test_barrier_absent_lets_threads_run_ahead_is_allowed():
    loop = ThreadedLoop([LoopSpec(0, 3), LoopSpec(0, 6)], "aB", num_threads=2)
    got = run(loop)
    assert sorted(v for vs in got.values() for v in vs) == [(a, b) for a in range(3)
                                                             for b in range(6)]


def test_uneven_blocks_are_cut_at_the_end():
    loop = ThreadedLoop([LoopSpec(1, 10, 2, [4])], "aa")
    ref = [(i,) for b in range(1, 10, 4) for i in range(b, min(b + 4, 10), 2)]
    assert run(loop) == {0: ref}


def test_init_term_and_errors_propagate():
    calls = []
    loop = ThreadedLoop([LoopSpec(0, 4)], "A", num_threads=2)
    loop(lambda ind: None, init=lambda: calls.append("i"), term=lambda: calls.append("t"))
    assert sorted(calls) == ["i", "i", "t", "t"]

    def bad(ind):
        if ind[0] == 3:
            raise KeyError("boom")
    with pytest.raises(KeyError):
        ThreadedLoop([LoopSpec(0, 4)], "A|", num_threads=2)(bad)


def test_parse_is_cached():
    assert parse("bcaBCb") is parse("bcaBCb")


@pytest.mark.parametrize("text, pos, what", [
    ("bcaBCbx", 6, "no LoopSpec"),
    ("bca?", 3, "unexpected character"),
    ("bc{R:2}a", 2, "sequential"),
    ("bcA{R:2", 3, "malformed"),
    ("bcA{X:2}", 3, "malformed"),
    ("bcaBCb @ chunky", 9, "directive"),
    ("bcaBCb @ schedule(dynamic, 0)", 27, "chunk"),
    ("ab", 2, "no letter"),
    ("|abc", 0, "must follow"),
    ("aBcB", 3, "consecutive"),
    ("Ab|c", 2, "inside the parallel"),
    ("A{R:2}bC{R:2}", 7, "two loops"),
    ("", 0, "no loop letters"),
])
def test_malformed_strings_point_at_the_character(text, pos, what):
    specs = [LoopSpec(0, 4), LoopSpec(0, 4), LoopSpec(0, 4)]
    with pytest.raises(ValueError, match=what) as ei:
        ThreadedLoop(specs, text)
    msg = str(ei.value)
    assert f"(character {pos})" in msg
    lines = msg.splitlines()
    assert lines[-1].index("^") - 2 == pos and lines[-2].strip() == text.strip()


def test_bad_specs_point_at_their_letter():
    with pytest.raises(ValueError, match="step") as ei:
        ThreadedLoop([LoopSpec(0, 4), LoopSpec(0, 4, 0)], "ab")
    assert "(character 1)" in str(ei.value)
    with pytest.raises(ValueError, match="block steps") as ei:
        ThreadedLoop([LoopSpec(0, 4, 1, [2])], "aaa")
    assert "(character 2)" in str(ei.value)
    with pytest.raises(ValueError, match="block step") as ei:
        ThreadedLoop([LoopSpec(0, 4, 1, [0])], "aa")
    with pytest.raises(TypeError):
        LoopSpec(0, 1.5)
    with pytest.raises(TypeError):
        ThreadedLoop([(0, 4, 1)], "a")


@pytest.mark.parametrize("spec", ["AB", "BA", "ab", "aB{R:2}", "A{R:2}B{C:1}", "BA @ schedule(dynamic, 1)"])
def test_equation_body_in_c(isa, spec):
    """An equation as the C body: every tile of the result computed once, broadcasts kept."""
    import numpy as np
    from pytpp.tpp import equation as eq
    rng = np.random.default_rng(3)
    m, n, bm, bn = 37, 70, 8, 16
    x, r, c = eq.input(0), eq.input(1), eq.input(2)
    f = eq.compile(eq.tanh(x + r) * c - 1.0, shape=(m, n), dtype=np.float32)
    X = rng.standard_normal((m, n)).astype(np.float32)
    R = rng.standard_normal((1, n)).astype(np.float32)
    C = rng.standard_normal((m, 1)).astype(np.float32)
    if spec.lower().startswith("b"):
        specs = [LoopSpec(0, n, bn), LoopSpec(0, m, bm)]
        rows, cols = 1, 0
    else:
        specs = [LoopSpec(0, m, bm), LoopSpec(0, n, bn)]
        rows, cols = 0, 1
    loop = ThreadedLoop(specs, spec, num_threads=2)
    out = np.full((m, n), np.nan, np.float32)
    got = loop.run_equation(f, X, R, C, out=out, tile=(bm, bn), rows=rows, cols=cols)
    assert got is out
    np.testing.assert_allclose(out, f(X, R, C), rtol=1e-6, atol=1e-6)


def test_equation_body_refusals():
    import numpy as np
    from pytpp.tpp import equation as eq
    x = eq.input(0)
    loop = ThreadedLoop([LoopSpec(0, 4, 2), LoopSpec(0, 8, 4)], "Ab")
    g = eq.compile(x / eq.sum(x), shape=(4, 8), dtype=np.float64)
    with pytest.raises(ValueError, match="span"):
        loop.run_equation(g, np.ones((4, 8)), tile=(2, 4))
    h = eq.compile(x @ eq.input(1), shape=(4, 8), dtype=np.float64)
    with pytest.raises(ValueError, match="products"):
        loop.run_equation(h, np.ones((4, 3)), np.ones((3, 8)), tile=(2, 4))
    with pytest.raises(TypeError):
        loop.run_equation(lambda a: a, np.ones((4, 8)), tile=(2, 4))
    whole = ThreadedLoop([LoopSpec(0, 4, 2), LoopSpec(0, 8, 8)], "Ab")
    np.testing.assert_allclose(whole.run_equation(g, np.ones((4, 8)), tile=(2, 8)),
                               np.full((4, 8), 1 / 8))
