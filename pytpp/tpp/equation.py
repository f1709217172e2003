"""TPP matrix equations (paper 000, section 4): trees of TPP nodes, planned once, run in C.

Build a tree from inputs with Python operators and the functions here, compile it for a shape
and dtype, call it on arrays:

>>> import numpy as np
>>> from pytpp.tpp import equation as eq
>>> a, b, c = eq.input(0), eq.input(1), eq.input(2)
>>> f = eq.compile(eq.tanh(a + b) * c, shape=(2, 3), dtype=np.float32)
>>> x = np.ones((2, 3), np.float32)
>>> np.allclose(f(x, x, x), np.tanh(2.0))
True
>>> f is eq.compile(eq.tanh(a + b) * c, shape=(2, 3), dtype=np.float32)  # another tree
False

Nodes: element-wise unary (``tanh``, ``sigmoid``, ``relu``, ``exp``, ``abs``, ``sqrt`` ...),
binary (``+ - * /``, ``maximum``, ``minimum``), ternary (``muladd(a, b, c) = a * b + c``), row
reductions (``sum``, ``max``, ``min`` over ``axis=1``: one value per row, broadcast back by the
consumers), matrix products ``x @ y`` of two inputs, and Python numbers (constants). An input is
``(m, n)``, or broadcasts as ``(1, n)``, ``(m, 1)``, ``(1, 1)``; a product's operands are
``(m, k)`` and ``(k, n)``.

The plan (``f.plan()``): register scores (paper Algorithm 3; a ternary node whose children
score s1 >= s2 >= s3 scores max(s1, s2 + 1, s3 + 2, 1)), the execution order visiting children
by decreasing score and the temporaries reserved and recycled (Algorithm 4). Execution is C
only, per block of rows and columns, threads over blocks, the GIL released: strategy 2 (trees of
element-wise nodes: one fused kernel per ISA level walks the plan on a chunk of a row with the
temporaries in a few local vectors) or strategy 1 (temporaries as L1-sized tiles, each node one
call of the level's TPP kernels per tile row, a product one BRGEMM per tile; reductions take
whole rows). Under ``strategy="auto"`` two idioms, softmax and layer normalisation over rows,
run the fused row kernels written for them (pytpp/tpp/_idioms.py). docs/equations.md has the
details and figures.
"""
from __future__ import annotations

import builtins
import numbers
import threading

import numpy as np

from pytpp import _validate
from pytpp._core import _eltwise as _ew
from pytpp._core import _equation as _eq
from pytpp.tpp import _idioms

__all__ = ["Expr", "input", "compile", "tanh", "sigmoid", "relu", "exp", "abs", "sqrt",
           "square", "reciprocal", "rsqrt", "gelu", "muladd", "maximum", "minimum", "sum",
           "max", "min", "Equation"]

_FN = "pytpp.tpp.equation"
_U, _B, _T = _ew.UNARY_CODES, _ew.BINARY_CODES, _ew.TERNARY_CODES
_R = _ew.REDUCE_CODES
_DTYPES = (_validate.F32, _validate.BF16, _validate.F64)
_STORE = {_validate.F64: _eq.F64, _validate.F32: _eq.F32, _validate.BF16: _eq.BF16}
_BCAST_NONE, _BCAST_ROW, _BCAST_COL, _BCAST_SCALAR = 0, 1, 2, 3


class Expr:
    """A node of an equation tree. Combine with ``+ - * / @``, unary ``-`` and the module's
    functions; Python numbers become constants."""

    __slots__ = ("kind", "op", "children", "value", "__weakref__", "_compiled", "_lock")
    __array_ufunc__ = None      # numpy scalars and arrays on the left defer to these operators

    def __init__(self, kind, op=None, children=(), value=None):
        self.kind = kind            # "input", "const", "unary", "binary", "ternary", "reduce", "matmul"
        self.op = op
        self.children = tuple(children)
        self.value = value          # input index or constant
        self._compiled = {}
        self._lock = threading.Lock()

    def __add__(self, other): return _binary("add", self, other)
    def __radd__(self, other): return _binary("add", other, self)
    def __sub__(self, other): return _binary("sub", self, other)
    def __rsub__(self, other): return _binary("sub", other, self)
    def __mul__(self, other): return _binary("mul", self, other)
    def __rmul__(self, other): return _binary("mul", other, self)
    def __truediv__(self, other): return _binary("div", self, other)
    def __rtruediv__(self, other): return _binary("div", other, self)
    def __neg__(self): return _unary("negate", self)

    def __matmul__(self, other):
        other = _expr(other, "@")
        for side, e in (("left", self), ("right", other)):
            if e.kind != "input":
                raise ValueError(f"{_FN}: the operands of @ must be inputs; the {side} one is "
                                 f"{e!r} (compute it in its own equation first)")
        return Expr("matmul", "matmul", (self, other))

    def __rmatmul__(self, other):
        return _expr(other, "@").__matmul__(self)

    def __repr__(self):
        if self.kind == "input":
            return f"input({self.value})"
        if self.kind == "const":
            return repr(self.value)
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
        if self.kind in ("binary", "matmul") and self.op in sym:
            return f"({self.children[0]!r} {sym[self.op]} {self.children[1]!r})"
        if self.kind == "reduce":
            return f"{self.op}({self.children[0]!r}, axis=1)"
        return f"{self.op}({', '.join(repr(c) for c in self.children)})"

    def __bool__(self):
        raise TypeError(f"{_FN}: an expression has no truth value")


def _expr(x, where):
    if isinstance(x, Expr):
        return x
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return Expr("const", value=float(x))
    raise TypeError(f"{_FN}: {where} takes equation expressions or real numbers, "
                    f"got {type(x).__name__}")


def _unary(op, x):
    return Expr("unary", op, (_expr(x, op),))


def _binary(op, x, y):
    return Expr("binary", op, (_expr(x, op), _expr(y, op)))


def input(i: int) -> Expr:  # noqa: A001 (the issue's name)
    """Input ``i`` (i >= 0) of the equation: the i-th array the compiled function takes.

    >>> from pytpp.tpp import equation as eq
    >>> eq.input(1)
    input(1)
    """
    i = _validate.nonneg_int(i, "i", f"{_FN}.input")
    return Expr("input", value=i)


def _make_unary(op, doc):
    def f(x):
        return _unary(op, x)
    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"Element-wise {doc} of an expression (the ``{op}`` TPP)."
    return f


tanh = _make_unary("tanh", "hyperbolic tangent")
sigmoid = _make_unary("sigmoid", "logistic sigmoid 1 / (1 + exp(-x))")
relu = _make_unary("relu", "max(x, 0)")
exp = _make_unary("exp", "exponential")
abs = _make_unary("abs", "absolute value")  # noqa: A001
sqrt = _make_unary("sqrt", "square root")
square = _make_unary("square", "square x * x")
reciprocal = _make_unary("reciprocal", "reciprocal 1 / x")
rsqrt = _make_unary("rsqrt", "reciprocal square root")
gelu = _make_unary("gelu", "GELU (erf form)")


def muladd(a, b, c) -> Expr:
    """``a * b + c`` as one ternary node (one rounding: a fused multiply-add).

    >>> from pytpp.tpp import equation as eq
    >>> eq.muladd(eq.input(0), eq.input(1), 2.0)
    muladd(input(0), input(1), 2.0)
    """
    return Expr("ternary", "muladd", (_expr(a, "muladd"), _expr(b, "muladd"),
                                      _expr(c, "muladd")))


def maximum(a, b) -> Expr:
    """Element-wise maximum of two expressions."""
    return _binary("max", a, b)


def minimum(a, b) -> Expr:
    """Element-wise minimum of two expressions."""
    return _binary("min", a, b)


def _reduce(op, x, axis):
    if axis not in (1, -1):
        raise ValueError(f"{_FN}.{op}: axis must be 1 (over the columns of each row), got {axis}")
    return Expr("reduce", op, (_expr(x, op),))


def sum(x, axis: int = 1) -> Expr:  # noqa: A001
    """Sum over the columns of each row: one value per row, ``(m, 1)``, broadcast by its users.

    >>> import numpy as np
    >>> from pytpp.tpp import equation as eq
    >>> x = eq.input(0)
    >>> f = eq.compile(x / eq.sum(x), shape=(1, 4), dtype=np.float64)
    >>> f(np.array([[1.0, 1.0, 2.0, 4.0]]))
    array([[0.125, 0.125, 0.25 , 0.5  ]])
    """
    return _reduce("sum", x, axis)


def max(x, axis: int = 1) -> Expr:  # noqa: A001
    """Maximum over the columns of each row (``(m, 1)``)."""
    return _reduce("max", x, axis)


def min(x, axis: int = 1) -> Expr:  # noqa: A001
    """Minimum over the columns of each row (``(m, 1)``)."""
    return _reduce("min", x, axis)


# ------------------------------------------------------------------------------------------
# Planning: register scores (Algorithm 3 with the ternary rule above), execution order and
# temporaries (Algorithm 4).
# ------------------------------------------------------------------------------------------
def _inputs_of(e, found):
    stack = [e]
    while stack:
        x = stack.pop()
        if x.kind == "input":
            found.setdefault(x.value, []).append(x)
        stack.extend(x.children)
    return found


def _score(e, scores):
    """Register score of every node (by id): leaves 0; unary max(1, child); binary the children's
    score + 1 when equal, else the larger; ternary max(s1, s2 + 1, s3 + 2, 1) over the sorted
    children scores; reductions like unary nodes, products like binary ones."""
    if e.kind in ("input", "const"):
        v = 0
    else:
        cs = sorted((_score(c, scores) for c in e.children), reverse=True)
        if len(cs) == 1:
            v = builtins.max(1, cs[0])
        elif len(cs) == 2:
            v = cs[0] + 1 if cs[0] == cs[1] else cs[0]
        else:
            v = builtins.max(cs[0], cs[1] + 1, cs[2] + 2, 1)
    scores[id(e)] = v
    return v


class _Planner:
    def __init__(self, scores, slot_of_leaf, col_leaf):
        self.scores = scores
        self.slot_of_leaf = slot_of_leaf    # leaf id -> input slot number
        self.col_leaf = col_leaf            # input slot -> one value per row
        self.free = []
        self.ntemps = 0
        self.instrs = []                    # (node, kind, op, srcs, dst, col, k)
        self.tmp = {}                       # node id -> temporary
        self.uses = {}                      # node id -> users not yet run
        self.col = {}

    def reserve(self):
        if self.free:
            self.free.sort()
            return self.free.pop(0)
        self.ntemps += 1
        return self.ntemps - 1

    def recycle(self, t):
        self.free.append(t)

    def slot(self, e):
        if e.kind in ("input", "const"):
            return _eq.OUT - 1 - self.slot_of_leaf[id(e)]   # PYTPP_EQN_INPUT(i) = -2 - i
        return self.tmp[id(e)]

    def is_col(self, e):
        if e.kind in ("input", "const"):
            return self.col_leaf[self.slot_of_leaf[id(e)]]
        return self.col[id(e)]

    def visit(self, e):
        if e.kind in ("input", "const") or id(e) in self.tmp:
            return                 # a leaf, or a shared subexpression computed already
        order = sorted(range(len(e.children)), key=lambda j: -self.scores[id(e.children[j])])
        for j in order:            # Algorithm 4: children by decreasing register score
            self.visit(e.children[j])
        # reuse a non-leaf child's temporary, recycle the others; a shared subexpression keeps
        # its temporary until its last user has run
        t = None
        for c in e.children:
            if c.kind in ("input", "const"):
                continue
            self.uses[id(c)] -= 1
            if self.uses[id(c)] == 0:
                if t is None:
                    t = self.tmp[id(c)]
                elif self.tmp[id(c)] != t:
                    self.recycle(self.tmp[id(c)])
        if t is None:
            t = self.reserve()
        self.tmp[id(e)] = t
        if e.kind == "reduce":
            if self.is_col(e.children[0]):
                raise ValueError(f"{_FN}: {e!r} reduces a value that is already one per row")
            col = True
        elif e.kind == "matmul":
            col = False
        else:
            col = builtins.all(self.is_col(c) for c in e.children)
        self.col[id(e)] = col
        kind = {"unary": _eq.UNARY, "binary": _eq.BINARY, "ternary": _eq.TERNARY,
                "reduce": _eq.REDUCE, "matmul": _eq.MATMUL}[e.kind]
        codes = {"unary": _U, "binary": _B, "ternary": _T, "reduce": _R}
        op = 0 if e.kind == "matmul" else codes[e.kind][e.op]
        srcs = [self.slot(c) for c in e.children] + [0] * (3 - len(e.children))
        self.instrs.append([e, kind, op, srcs, t, col, 0])


def _fuse_square_sum(instrs, scores):
    """sum(square(x)) as one reduction of squares (the row kernels' squared mode): the square
    node goes when its result feeds only that sum and its operand is unchanged in between."""
    sq_code, sum_code = _U["square"], _R["sum"]
    out, drop = [], set()
    for i, ins in enumerate(instrs):
        node, kind, op, srcs, dst, col, k = ins
        if kind != _eq.UNARY or op != sq_code or col or dst == _eq.OUT:
            continue
        for j in range(i + 1, len(instrs)):
            _, kj, oj, sj, dj, _, _ = instrs[j]
            reads = dst in sj[:len(instrs[j][0].children)]
            if reads:
                if kj == _eq.REDUCE and oj == sum_code and sj[0] == dst and not _read_later(
                        instrs, j, dst) and not any(x[4] == srcs[0] for x in instrs[i + 1:j]):
                    instrs[j][3] = [srcs[0], 0, 0]
                    instrs[j][6] = 1
                    fused = Expr("reduce", "sum_of_squares", node.children)
                    scores[id(fused)] = scores[id(instrs[j][0])]
                    instrs[j][0] = fused
                    drop.add(i)
                break
            if dj == dst:
                break
    for i, ins in enumerate(instrs):
        if i not in drop:
            out.append(ins)
    return out


def _read_later(instrs, j, t):
    """t (as instruction j reads it) is read again after j"""
    if instrs[j][4] == t:
        return False
    for node, _, _, srcs, dst, _, _ in instrs[j + 1:]:
        if t in srcs[:len(node.children)]:
            return True
        if dst == t:
            return False
    return False


def _describe_slot(s, names):
    return names[_eq.OUT - 1 - s] if s <= _eq.OUT - 1 else ("out" if s == _eq.OUT else f"t{s}")


class Equation:
    """A compiled equation: ``f(*inputs, out=None)`` returns ``out`` or a new ``(m, n)`` array.

    Made by :func:`compile`, cached per expression object and arguments."""

    def __init__(self, expr, shape, dtype, input_dtypes, strategy):
        self.expr = expr
        self.shape = shape
        self.dtype = dtype
        self.compute = _validate.F64 if dtype == _validate.F64 else _validate.F32
        found = _inputs_of(expr, {})
        self.ninputs = (builtins.max(found) + 1) if found else 0
        if input_dtypes is None:
            input_dtypes = (dtype,) * self.ninputs
        self.input_dtypes = tuple(input_dtypes)
        self.strategy = strategy
        self.matmul_inputs = {}          # input -> "a" (m, k) or "b" (k, n)
        self.elem_inputs = set()
        stack = [expr]
        while stack:
            x = stack.pop()
            if x.kind == "matmul":
                for side, c in zip("ab", x.children):
                    prev = self.matmul_inputs.setdefault(c.value, side)
                    if prev != side:
                        raise ValueError(f"{_FN}.compile: input({c.value}) is both a left and a "
                                         f"right operand of @")
            else:
                stack.extend(x.children)
                if x.kind not in ("input", "const"):
                    self.elem_inputs.update(c.value for c in x.children if c.kind == "input")
        if expr.kind == "input":
            self.elem_inputs.add(expr.value)
        both = self.elem_inputs & set(self.matmul_inputs)
        if both:
            raise ValueError(f"{_FN}.compile: input({min(both)}) is used both as an operand of "
                             f"@ and element-wise")
        self.consts = []
        # a whole tree the fused kernel of a known composite computes (paper 4.3's idioms)
        self._idiom = (_idioms.match(expr, shape, dtype, self.input_dtypes)
                       if strategy == "auto" and not self.matmul_inputs else None)
        self._programs = {}
        self._lock = threading.Lock()
        self._last_plan = None
        self._dense = None

    # -- planning --------------------------------------------------------------------------
    def _program(self, col_inputs, ks):
        key = (col_inputs, ks)
        got = self._programs.get(key)
        if got is not None:
            return got
        # a subexpression object used twice (x - max(x) in softmax) is computed once
        root = self.expr
        if root.kind in ("input", "const"):
            root = Expr("unary", "identity", (root,))
        scores = {}
        _score(root, scores)
        slot_of_leaf, consts = {}, []
        stack = [root]
        while stack:
            x = stack.pop()
            if x.kind == "input":
                slot_of_leaf[id(x)] = x.value
            elif x.kind == "const":
                slot_of_leaf[id(x)] = self.ninputs + len(consts)
                consts.append(x.value)
            stack.extend(x.children)
        col_leaf = list(col_inputs) + [True] * len(consts)
        pl = _Planner(scores, slot_of_leaf, col_leaf)
        seen, stack = set(), [root]
        while stack:
            x = stack.pop()
            for c in x.children:
                pl.uses[id(c)] = pl.uses.get(id(c), 0) + 1
                if id(c) not in seen:
                    seen.add(id(c))
                    stack.append(c)
        pl.visit(root)
        pl.instrs[-1][4] = _eq.OUT
        pl.instrs = _fuse_square_sum(pl.instrs, scores)
        rows = []
        for node, kind, op, srcs, dst, col, k in pl.instrs:
            if kind == _eq.MATMUL:
                k = ks[node.children[0].value]
            rows.append((kind, op, srcs[0], srcs[1], srcs[2], dst, int(col), k))
        use_fused = (not builtins.any(r[0] in (_eq.REDUCE, _eq.MATMUL) for r in rows)
                     and pl.ntemps <= _eq.MAX_VTEMPS and self.ninputs + len(consts) <= 32)
        strategy = self.strategy
        if strategy == "auto":   # 3 measured 10-20% slower than 1 on softmax / layer_norm rows
            strategy = 2 if use_fused else 1
        elif strategy == 2 and not use_fused:
            strategy = 3
        cdt = _eq.F64 if self.compute == _validate.F64 else _eq.F32
        prog = _eq.Program(rows, pl.ntemps, self.ninputs + len(consts), cdt)
        carr = [np.full((1, 1), v, dtype=self.compute) for v in consts]
        text = self._plan_text(pl, scores, root, consts, strategy)
        got = (prog, carr, strategy, text)
        with self._lock:
            self._programs.setdefault(key, got)
            return self._programs[key]

    def _plan_text(self, pl, scores, root, consts, strategy):
        names = [f"in{i}" for i in range(self.ninputs)] + [repr(c) for c in consts]
        m, n = self.shape
        how = {2: "strategy 2: fused kernel, temporaries in local vectors per row chunk",
               1: "strategy 1: temporaries as L1 tiles, one TPP call per node and tile row",
               3: "strategy 3: L1 tiles for reductions and products, each run of element-wise "
                  "nodes between them one fused pass"}[strategy]
        if self._idiom:
            how = (f"idiom: {self._idiom[0]} over rows, run by its fused row kernel (the plan "
                   f"below runs when the operands are not the kernel's: {how})")
        lines = [f"equation {root!r}", f"  shape ({m}, {n}), dtype {self.dtype.name}, compute "
                 f"{self.compute.name}; {how}",
                 f"  register score of the root {scores[id(root)]}, temporaries {pl.ntemps}"]
        for t, (node, kind, op, srcs, dst, col, _) in enumerate(pl.instrs):
            args = ", ".join(_describe_slot(s, names) for s in srcs[:len(node.children)])
            shape = " (one per row)" if col else ""
            lines.append(f"  t={t}: {_describe_slot(dst, names)} = {node.op}({args}){shape}"
                         f"   [score {scores[id(node)]}]")
        return "\n".join(lines)

    def plan(self) -> str:
        """Prints the execution plan (for inputs of full shape unless the last call had
        broadcasts) and returns it as a string."""
        text = self._last_plan
        if text is None:
            m, n = self.shape
            ks = tuple(1 for _ in range(self.ninputs))
            text = self._program(tuple(False for _ in range(self.ninputs)), ks)[3]
        print(text)
        return text

    # -- calling ---------------------------------------------------------------------------
    def _operand(self, i, x):
        fn = _FN
        m, n = self.shape
        if not isinstance(x, np.ndarray):
            x = _validate.as_array(x, f"input {i}", fn)
        want = self.input_dtypes[i]
        if x.dtype != want:
            raise TypeError(f"{fn}: input {i} has dtype {x.dtype}; this equation takes {want}")
        if not x.dtype.isnative:
            x = _validate.native(x)
        if i in self.matmul_inputs:
            if x.ndim != 2:
                raise ValueError(f"{fn}: input {i} (an operand of @) must be 2-D, got shape "
                                 f"{x.shape}")
            side = self.matmul_inputs[i]
            if side == "a" and x.shape[0] != m:
                raise ValueError(f"{fn}: input {i} has shape {x.shape}; the left operand of @ "
                                 f"must be ({m}, k)")
            if side == "b" and x.shape[1] != n:
                raise ValueError(f"{fn}: input {i} has shape {x.shape}; the right operand of @ "
                                 f"must be (k, {n})")
            if x.dtype != self.compute:
                x = x.astype(self.compute)
            return x, _BCAST_NONE
        if x.ndim == 1:
            x = x.reshape(1, -1)
        elif x.ndim == 0:
            x = x.reshape(1, 1)
        if x.ndim != 2 or x.shape[0] not in (1, m) or x.shape[1] not in (1, n):
            raise ValueError(f"{fn}: input {i} has shape {x.shape}; expected ({m}, {n}) or a "
                             f"broadcast (1, {n}), ({m}, 1), (1, 1)")
        rows, cols = x.shape
        if rows == m and cols == n and not (m == 1 and n == 1):
            bc = (_BCAST_ROW if m == 1 else _BCAST_COL if n == 1 else _BCAST_NONE)
            if m == 1 and n > 1:
                bc = _BCAST_ROW
        elif rows == 1 and cols == 1:
            bc = _BCAST_SCALAR
        elif rows == 1:
            bc = _BCAST_ROW
        else:
            bc = _BCAST_COL
        return x, bc

    def __call__(self, *inputs, out=None):
        dense = self._dense if self._dense is not None else self._dense_program()
        if dense:
            prog, codes, carr, strategy, text = dense
            m, n = self.shape
            got = prog.run_dense(inputs, self.input_dtypes, codes, carr, out, self.dtype,
                                 _STORE[self.dtype], m, n, strategy)
            if got is not None:
                self._last_plan = text
                return got
        got = self._prepare(inputs, out)
        if got[0] is None:
            return got[1]
        prog, ops, specs, target, strategy = got
        if not (self._idiom and _idioms.run(self._idiom, ops, specs, target, _STORE[self.dtype])):
            prog.run(ops, specs, target, _STORE[self.dtype], strategy)
        if out is not None and target is not out:
            out[...] = target
            return out
        return target

    def _dense_program(self):
        """(program, input dtype codes, constants, strategy, plan text) of calls whose inputs
        are all dense (m, n) arrays, checked and run in C; False where such calls take the
        general path (n > 1: a column is a broadcast there; no products, no idiom)."""
        m, n = self.shape
        dense = False
        if m >= 1 and n > 1 and not self.matmul_inputs and not self._idiom:
            prog, carr, strategy, text = self._program((False,) * self.ninputs,
                                                       (0,) * self.ninputs)
            dense = (prog, tuple(_STORE[d] for d in self.input_dtypes), carr, strategy, text)
        self._dense = dense
        return dense

    def _prepare(self, inputs, out):
        """(program, operands, their (ld, dtype, bcast), target array, strategy) of a call, or
        (None, result) when there is nothing to compute."""
        fn = _FN
        m, n = self.shape
        if len(inputs) != self.ninputs:
            raise ValueError(f"{fn}: this equation takes {self.ninputs} inputs "
                             f"(input(0) .. input({self.ninputs - 1})), got {len(inputs)}")
        # the common case costs little from Python: dense (m, n) inputs of the right dtype
        full = (m, n)
        ops, bcs, specs = [], [], []
        fast = m > 1 and n > 1 and not self.matmul_inputs
        for i, x in enumerate(inputs):
            if (fast and type(x) is np.ndarray and x.shape == full
                    and x.dtype == self.input_dtypes[i] and x.flags.c_contiguous):
                ops.append(x)
                bcs.append(_BCAST_NONE)
                specs.append((n, _STORE[x.dtype], _BCAST_NONE))
                continue
            a, bc = self._operand(i, x)
            if bc == _BCAST_NONE and i not in self.matmul_inputs and (
                    a.strides[1] != a.itemsize or a.strides[0] % a.itemsize
                    or a.strides[0] < 0):
                a = np.ascontiguousarray(a)
            if i in self.matmul_inputs and (a.strides[1] != a.itemsize
                                            or a.strides[0] % a.itemsize or a.strides[0] <= 0):
                a = np.ascontiguousarray(a)
            if bc == _BCAST_ROW and a.shape[1] > 1 and a.strides[1] != a.itemsize:
                a = np.ascontiguousarray(a)
            ld = a.strides[0] // a.itemsize if a.ndim == 2 and a.shape[0] > 1 else a.shape[-1]
            ops.append(a)
            bcs.append(bc)
            specs.append((int(ld), _STORE[a.dtype], bc))
        ks = [0] * self.ninputs
        if self.matmul_inputs:
            for i, side in self.matmul_inputs.items():
                ks[i] = ops[i].shape[1] if side == "a" else ops[i].shape[0]
            # every product of the tree pairs its own inputs: each pair's k must agree
            self._check_k(self.expr, ks)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"{fn}: out must be a numpy.ndarray, got {type(out).__name__}")
            if out.shape != full:
                raise ValueError(f"{fn}: out has shape {out.shape}; expected {full}")
            if out.dtype != self.dtype:
                raise TypeError(f"{fn}: out has dtype {out.dtype}; expected {self.dtype}")
            if not out.flags.writeable:
                raise ValueError(f"{fn}: out is read-only")
        if m == 0 or n == 0:
            return None, (out if out is not None else np.empty(full, self.dtype))
        target = out
        if out is None:
            target = np.empty(full, self.dtype)
        elif not out.flags.c_contiguous and not (
                out.strides[1] == out.itemsize and out.strides[0] % out.itemsize == 0
                and out.strides[0] > 0):
            target = np.empty(full, self.dtype)
        elif ops:
            # an input sharing memory with the output is copied, unless it is the same view
            # of an element-wise operand (computed in place: each element read before written)
            for i, a in enumerate(ops):
                if a.size and np.may_share_memory(a, target) and (
                        i in self.matmul_inputs or bcs[i] != _BCAST_NONE
                        or not _validate.same_view(a, target)):
                    ops[i] = a.copy()
        key = (tuple(bc == _BCAST_COL or bc == _BCAST_SCALAR for bc in bcs), tuple(ks))
        got = self._programs.get(key)
        if got is None:
            if self.matmul_inputs:
                key = (tuple(c and i not in self.matmul_inputs for i, c in enumerate(key[0])),
                       key[1])
            got = self._program(*key)
        prog, carr, strategy, text = got
        self._last_plan = text
        for c in carr:
            ops.append(c)
            specs.append((1, _STORE[c.dtype], _BCAST_SCALAR))
        return prog, ops, specs, target, strategy

    def _has_reduce(self):
        stack = [self.expr]
        while stack:
            x = stack.pop()
            if x.kind == "reduce":
                return True
            stack.extend(x.children)
        return False

    def _check_k(self, e, ks):
        stack = [e]
        while stack:
            x = stack.pop()
            if x.kind == "matmul":
                a, b = x.children
                if ks[a.value] != ks[b.value]:
                    raise ValueError(f"{_FN}: input({a.value}) @ input({b.value}): inner "
                                     f"dimensions {ks[a.value]} and {ks[b.value]} differ")
            stack.extend(x.children)

    def __repr__(self):
        return (f"<pytpp equation {self.expr!r} shape={self.shape} dtype={self.dtype.name}>")


def compile(expr: Expr, shape: tuple[int, int], dtype=np.float32, *, input_dtypes=None,
            strategy="auto") -> Equation:  # noqa: A001 (the issue's name)
    """Plan `expr` for results of `shape` ``(m, n)`` and `dtype` (float32, bfloat16 or float64).

    Parameters
    ----------
    expr : Expr
        The tree (inputs ``input(i)``; the callable takes inputs 0 .. the largest index).
    shape : (int, int)
        The result's shape.
    dtype : dtype
        The result's dtype; float32 and bfloat16 compute in float32, float64 in float64.
    input_dtypes : sequence of dtypes, optional
        Each input's dtype (default: `dtype`), for mixes such as bfloat16 inputs and a float32
        result; float64 equations take float64 inputs only.
    strategy : "auto", 1, 2 or 3
        1: every node one TPP call per tile row, temporaries in L1 tiles; 2: the fused kernel
        (trees of element-wise nodes only; others run as 3); 3: tiles for reductions and
        products, each run of element-wise nodes between them one fused pass. "auto": a tree
        that is softmax or layer normalisation over rows (an idiom, paper 4.3) runs that
        composite's fused row kernel (``pytpp.nn.softmax`` / ``layer_norm``'s); otherwise 2
        where it applies, else 1 (3 measured 10-20% slower than 1 on softmax and layer_norm
        rows: the fused kernel's set-up per tile costs more than the passes it saves).

    Returns
    -------
    Equation
        ``f(*inputs, out=None)``; the same object for the same expression and arguments.

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.tpp import equation as eq
    >>> x, w = eq.input(0), eq.input(1)
    >>> f = eq.compile(eq.relu(x @ w) + 1.0, shape=(2, 2), dtype=np.float64)
    >>> f(np.eye(2), np.array([[1.0, -1.0], [2.0, 3.0]]))
    array([[2., 1.],
           [3., 4.]])
    """
    fn = f"{_FN}.compile"
    if not isinstance(expr, Expr):
        raise TypeError(f"{fn}: expr must be an equation expression, got {type(expr).__name__}")
    try:
        m, n = shape
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: shape must be a pair (m, n), got {shape!r}") from None
    m = _validate.nonneg_int(m, "shape[0]", fn)
    n = _validate.nonneg_int(n, "shape[1]", fn)
    dt = _validate.dtype_arg(dtype, _DTYPES, fn)
    if strategy not in ("auto", 1, 2, 3):
        raise ValueError(f"{fn}: strategy must be 'auto', 1, 2 or 3, got {strategy!r}")
    ninputs = (builtins.max(_inputs_of(expr, {})) + 1) if _inputs_of(expr, {}) else 0
    if input_dtypes is not None:
        input_dtypes = tuple(_validate.dtype_arg(d, _DTYPES, fn, "input_dtypes")
                             for d in input_dtypes)
        if len(input_dtypes) != ninputs:
            raise ValueError(f"{fn}: input_dtypes has {len(input_dtypes)} entries; the "
                             f"equation has {ninputs} inputs")
        if dt == _validate.F64 and builtins.any(d != _validate.F64 for d in input_dtypes):
            raise TypeError(f"{fn}: a float64 equation takes float64 inputs only")
        if dt != _validate.F64 and builtins.any(d == _validate.F64 for d in input_dtypes):
            raise TypeError(f"{fn}: a {dt.name} equation computes in float32: float64 inputs "
                            f"are not taken (use dtype=float64)")
    key = (m, n, dt, input_dtypes, strategy)
    got = expr._compiled.get(key)
    if got is not None:
        return got
    eqn = Equation(expr, (m, n), dt, input_dtypes, strategy)
    with expr._lock:
        return expr._compiled.setdefault(key, eqn)
