"""The random stream of dropout and ``unary("rand")``: Philox4x32-10 checked against an
independent Python implementation and its published known-answer vectors, the same on every ISA
level and thread split, and statistically sound (mask mean, independence across seeds and
positions, chi-square of the uniform fill). The seeds are fixed, so the statistics are
deterministic; the bounds are 5 standard deviations wide."""
import numpy as np
import pytest
from scipy import stats

import pytpp

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Reference Philox4x32-10 (Random123's philox4x32_R with R = 10), plain Python integers."""
    c = list(ctr)
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & MASK32, p1 & MASK32,
             ((p0 >> 32) ^ c[3] ^ k1) & MASK32, p0 & MASK32]
    return c


# Random123 kat_vectors: philox4x32 10 rounds
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr, key, expect", KAT)
def test_reference_philox_known_answers(ctr, key, expect):
    assert tuple(philox4x32_10(ctr, key)) == expect


def stream_words(seed, start, count):
    """Words of elements start ... start + count - 1 as the engine defines the stream: element e
    is word (e >> 3) & 3 of counter (e >> 5) * 8 + (e & 7)."""
    key = (seed & MASK32, seed >> 32)
    out = []
    for e in range(start, start + count):
        ctr = ((e >> 5) * 8 + (e & 7)) & (2 ** 64 - 1)
        out.append(philox4x32_10((ctr & MASK32, ctr >> 32, 0, 0), key)[(e >> 3) & 3])
    return np.array(out, np.uint64)


def rand_words(m, n, seed, base=0):
    """The engine's words, read back exactly from a float64 fill (word * 2**-32)."""
    kern = pytpp.tpp.unary("rand", m, n, np.float64, seed=seed)
    out = np.empty((m, n))
    kern(out, base=base)
    return (out * 2.0 ** 32).astype(np.uint64)


@pytest.mark.parametrize("seed", [0, 1, 0x9E3779B1, 2 ** 64 - 1, 0x0123456789ABCDEF])
@pytest.mark.parametrize("m, n, base", [(1, 100, 0), (3, 37, 5), (2, 64, 2 ** 32 - 40),
                                        (1, 70, 2 ** 64 - 33)])
def test_engine_stream_is_philox(seed, m, n, base, isa):
    got = rand_words(m, n, seed, base).reshape(-1)
    start = base
    expect = np.concatenate([stream_words(seed, (start + i * n) % 2 ** 64, n) for i in range(m)]) \
        if base + m * n <= 2 ** 64 else None
    if expect is None:   # wraps at 2**64: compute piecewise
        idx = [(base + i) % 2 ** 64 for i in range(m * n)]
        expect = np.concatenate([stream_words(seed, e, 1) for e in idx])
    np.testing.assert_array_equal(got, expect)


def test_same_numbers_on_every_isa_and_thread_count(threads):
    x = np.ones(100_003, np.float32)
    ref = None
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            for dt in (np.float32, np.float64):
                y, mask = pytpp.nn.dropout(x.astype(dt), 0.3, seed=1234, return_mask=True)
                if ref is None:
                    ref = mask
                np.testing.assert_array_equal(mask, ref)


def test_mask_is_the_threshold_of_the_words():
    n = 4096
    p = 0.37
    _, mask = pytpp.nn.dropout(np.ones(n), p, seed=99, return_mask=True)
    keep = np.unpackbits(mask, bitorder="little")[:n].astype(bool)
    words = stream_words(99, 0, n)
    np.testing.assert_array_equal(keep, words >= round(p * 2 ** 32))


def _keep(seed, n, p=0.5):
    _, mask = pytpp.nn.dropout(np.ones(n, np.float32), p, seed=seed, return_mask=True)
    return np.unpackbits(mask, bitorder="little")[:n].astype(bool)


N = 1 << 20


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_mask_mean(p):
    keep = _keep(5, N, p)
    sd = np.sqrt(p * (1 - p) / N)
    assert abs(keep.mean() - (1 - p)) < 5 * sd


@pytest.mark.parametrize("s, t", [(0, 1), (1, 2), (7, 7 + 0x9E3779B1), (0, 2 ** 32), (3, 3 ^ 1 << 63)])
def test_masks_of_different_seeds_are_independent(s, t):
    a, b = _keep(s, N), _keep(t, N)
    agree = (a == b).mean()
    assert abs(agree - 0.5) < 5 * 0.5 / np.sqrt(N)
    # no seed is another seed's stream shifted by a few elements
    for shift in range(1, 9):
        agree = (a[shift:] == b[:-shift]).mean()
        assert abs(agree - 0.5) < 5 * 0.5 / np.sqrt(N - shift)


@pytest.mark.parametrize("lag", [1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 64])
def test_positions_are_independent(lag):
    u = rand_words(1, N, 21).reshape(-1).astype(np.float64)
    r = np.corrcoef(u[:-lag], u[lag:])[0, 1]
    assert abs(r) < 5 / np.sqrt(N)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 1])
def test_rand_is_uniform(dtype, seed):
    out = np.empty((16, N // 16), dtype)
    pytpp.tpp.unary("rand", 16, N // 16, dtype, seed=seed)(out)
    assert out.min() >= 0.0 and out.max() < 1.0
    counts = np.histogram(out, bins=256, range=(0.0, 1.0))[0]
    assert stats.chisquare(counts).pvalue > 1e-6


def test_rand_seeds_do_not_correlate():
    a = np.empty(N)
    b = np.empty(N)
    pytpp.tpp.unary("rand", 1, N, np.float64, seed=0)(a)
    pytpp.tpp.unary("rand", 1, N, np.float64, seed=1)(b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(N)


# ---- the dropout API ----------------------------------------------------------------------------

def test_seed_none_draws_fresh_entropy():
    x = np.ones(4096)
    assert not np.array_equal(pytpp.nn.dropout(x), pytpp.nn.dropout(x))


def test_int_seed_is_reproducible():
    x = np.ones(4096)
    np.testing.assert_array_equal(pytpp.nn.dropout(x, seed=3), pytpp.nn.dropout(x, seed=3))
    assert not np.array_equal(pytpp.nn.dropout(x, seed=3), pytpp.nn.dropout(x, seed=4))


def test_generator_seed_is_reproducible():
    x = np.ones(4096)
    a = pytpp.nn.dropout(x, seed=np.random.default_rng(8))
    b = pytpp.nn.dropout(x, seed=np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(8)
    assert not np.array_equal(pytpp.nn.dropout(x, seed=gen), pytpp.nn.dropout(x, seed=gen))
    c = pytpp.nn.dropout(x, seed=np.random.SeedSequence(5))
    np.testing.assert_array_equal(c, pytpp.nn.dropout(x, seed=np.random.SeedSequence(5)))


def test_training_false_is_the_identity():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(pytpp.nn.dropout(x, 0.5, False), x)      # torch's positional
    np.testing.assert_array_equal(pytpp.nn.dropout(x, 0.5, training=False), x)
    out = np.empty_like(x)
    assert pytpp.nn.dropout(x, 0.9, training=False, out=out) is out
    np.testing.assert_array_equal(out, x)
    y, mask = pytpp.nn.dropout(x, 0.5, training=False, return_mask=True)
    assert mask.tolist() == [255]


def test_bad_arguments():
    x = np.ones(4)
    with pytest.raises(TypeError, match="training must be a bool"):
        pytpp.nn.dropout(x, 0.5, 42)
    with pytest.raises(TypeError, match="seed"):
        pytpp.nn.dropout(x, seed="abc")
    with pytest.raises(TypeError, match="seed"):
        pytpp.nn.dropout(x, seed=1.5)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        pytpp.nn.dropout(x, 1.0)
    with pytest.raises(TypeError, match="p must be a real number"):
        pytpp.nn.dropout(x, "half")


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_dropout_values(dtype):
    import ml_dtypes  # noqa: F401  (registers bfloat16)
    x = np.linspace(-3, 3, 999).astype(dtype)
    y, mask = pytpp.nn.dropout(x, 0.25, seed=17, return_mask=True)
    assert y.dtype == x.dtype
    keep = np.unpackbits(mask, bitorder="little")[:999].astype(bool)
    scale = 1 / 0.75
    expect = np.where(keep, x.astype(np.float64) * scale, 0.0)
    # scaled in the compute type (float32 / float64), rounded once to the storage type
    tol = {"float64": 1e-15, "float32": 1e-6, "bfloat16": 8e-3, "float16": 1e-3}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), expect, rtol=tol, atol=0)
