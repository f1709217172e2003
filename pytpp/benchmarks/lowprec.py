"""Low-precision contractions: bf16 and 8-bit BRGEMM in cache and a 1024^3 GEMM, against torch
(bf16 ``mm``, ``torch._int_mm``), numpy's int32 matmul and pytpp's own fp32 kernels (ref)."""
import ml_dtypes
import numpy as np

import pytpp

BF16 = ml_dtypes.bfloat16


def _ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _brgemm_int8(h, nb, m, n, k, threads):
    case = f"brgemm u8s8->s32 {nb}x{m}x{n}x{k}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    a, b = _ints(rng, (nb, m, k), np.uint8), _ints(rng, (nb, k, n), np.int8)
    bv = pytpp.linalg.vnni_pack(b)
    c = np.empty((m, n), np.int32)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=np.uint8, b_dtype=np.int8, beta=0.0)
    kern_v = pytpp.tpp.brgemm(m, n, k, dtype=np.uint8, b_dtype=np.int8, beta=0.0, b_vnni=True)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    cf = np.empty((m, n), np.float32)
    kf = pytpp.tpp.brgemm(m, n, k, dtype=np.float32, beta=0.0)
    a32, b32, tmp = a.astype(np.int32), b.astype(np.int32), np.empty((nb, m, n), np.int32)
    impls = [("pytpp vnni B", lambda: kern_v(a, bv, c, nb)),
             ("pytpp kernel", lambda: kern(a, b, c, nb)),
             ("pytpp fp32 (ref)", lambda: kf(af, bf, cf, nb)),
             ("numpy int32", lambda: np.matmul(a32, b32, out=tmp).sum(0, out=c))]
    torch = h.torch
    if torch is not None and m > 16 and k % 8 == 0 and n % 8 == 0:
        # torch._int_mm is s8 x s8: the same products with A shifted into int8
        ta = torch.from_numpy((a.astype(np.int16) - 128).astype(np.int8))
        ta = ta.permute(1, 0, 2).reshape(m, nb * k).contiguous()
        tb = torch.from_numpy(b).reshape(nb * k, n).contiguous()
        tc = torch.from_numpy(c)
        impls.append(("torch._int_mm", lambda: torch._int_mm(ta, tb, out=tc)))
    h.compare(case, threads, 2.0 * nb * m * n * k, "GOP/s", "int8", impls,
              nbytes=a.nbytes + b.nbytes + c.nbytes)


def _brgemm_bf16(h, nb, m, n, k, threads):
    case = f"brgemm bf16->f32 {nb}x{m}x{n}x{k}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(1)
    a = rng.standard_normal((nb, m, k)).astype(BF16)
    b = rng.standard_normal((nb, k, n)).astype(BF16)
    bv = pytpp.linalg.vnni_pack(b)
    c = np.empty((m, n), np.float32)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)
    kern_v = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0, b_vnni=True)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    kf = pytpp.tpp.brgemm(m, n, k, dtype=np.float32, beta=0.0)
    cf = np.empty((m, n), np.float32)
    impls = [("pytpp vnni B", lambda: kern_v(a, bv, c, nb)),
             ("pytpp kernel", lambda: kern(a, b, c, nb)),
             ("pytpp fp32 (ref)", lambda: kf(af, bf, cf, nb))]
    torch = h.torch
    if torch is not None:
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        ta = ta.permute(1, 0, 2).reshape(m, nb * k).contiguous()
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16).reshape(nb * k, n)
        impls.append(("torch mm bf16", lambda: torch.mm(ta, tb)))
    h.compare(case, threads, 2.0 * nb * m * n * k, "GFLOP/s", "bf16", impls,
              nbytes=a.nbytes + b.nbytes + c.nbytes)


def _gemm(h, size, threads):
    m = n = k = size
    case = f"gemm u8s8->s32 {size}^3"
    if h.wants(case):
        rng = np.random.default_rng(2)
        a, b = _ints(rng, (m, k), np.uint8), _ints(rng, (k, n), np.int8)
        bv = pytpp.linalg.vnni_pack(b)
        c = np.empty((m, n), np.int32)
        g = pytpp.tpp.gemm(m, n, k, dtype=np.uint8, b_dtype=np.int8, beta=0.0, b_vnni=True)
        af, bf = a.astype(np.float32), b.astype(np.float32)
        cf = np.empty((m, n), np.float32)
        a32, b32 = a.astype(np.int32), b.astype(np.int32)
        impls = [("pytpp vnni B", lambda: g(a, bv, c)),
                 ("pytpp.matmul", lambda: pytpp.matmul(a, b, dtype=np.int32)),
                 ("pytpp fp32 (ref)", lambda: pytpp.matmul(af, bf, out=cf)),
                 ("numpy int32", lambda: np.matmul(a32, b32, out=c))]
        torch = h.torch
        if torch is not None:
            ta = torch.from_numpy((a.astype(np.int16) - 128).astype(np.int8))
            tb, tc = torch.from_numpy(b), torch.from_numpy(c)
            impls.append(("torch._int_mm", lambda: torch._int_mm(ta, tb, out=tc)))
        h.compare(case, threads, 2.0 * m * n * k, "GOP/s", "int8", impls,
                  nbytes=a.nbytes + b.nbytes + c.nbytes)
    case = f"gemm bf16->f32 {size}^3"
    if h.wants(case):
        rng = np.random.default_rng(3)
        a = rng.standard_normal((m, k)).astype(BF16)
        b = rng.standard_normal((k, n)).astype(BF16)
        bv = pytpp.linalg.vnni_pack(b)
        c = np.empty((m, n), np.float32)
        g = pytpp.tpp.gemm(m, n, k, dtype=BF16, beta=0.0, b_vnni=True)
        af, bf = a.astype(np.float32), b.astype(np.float32)
        cf = np.empty((m, n), np.float32)
        impls = [("pytpp vnni B", lambda: g(a, bv, c)),
                 ("pytpp.matmul", lambda: pytpp.matmul(a, b, out=c)),
                 ("pytpp fp32 (ref)", lambda: pytpp.matmul(af, bf, out=cf))]
        torch = h.torch
        if torch is not None:
            ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
            impls.append(("torch mm bf16", lambda: torch.mm(ta, tb)))
        h.compare(case, threads, 2.0 * m * n * k, "GFLOP/s", "bf16", impls,
                  nbytes=a.nbytes + b.nbytes + c.nbytes)


def run(h):
    h.header("Low precision: bf16 -> fp32 and u8 x s8 -> int32 BRGEMM / GEMM (pytpp fp32 as ref)")
    for threads in h.threads:
        h.set_threads(threads)
        _brgemm_int8(h, 16, 64, 64, 64, threads)
        _brgemm_bf16(h, 16, 64, 64, 64, threads)
        _gemm(h, 512 if h.quick else 1024, threads)
