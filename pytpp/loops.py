"""PARLOOPER loop nests (paper 001, section II): logical loops declared once, their order,
blocking and parallelisation chosen by one string.

>>> from pytpp.loops import LoopSpec, ThreadedLoop
>>> loop = ThreadedLoop([LoopSpec(0, 4, 1, [2]), LoopSpec(0, 2, 1)], "aba")
>>> seen = []
>>> loop(lambda ind: seen.append(tuple(ind)))
>>> seen
[(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]

The grammar of a loop-spec string:

- one letter per loop level; letter ``a`` is ``specs[0]``, ``b`` is ``specs[1]`` and so on. The
  order of the letters is the nest's order; a letter that appears j + 1 times is blocked j
  times: its first occurrence runs from ``start`` to ``end`` by ``block_steps[0]``, the next one
  through the enclosing occurrence's block by ``block_steps[1]`` ..., the last by ``step``
  (001 Listing 2). A block that runs past ``end`` is cut at ``end``.
- an upper-case letter is parallel. Consecutive upper-case letters are one work-shared loop
  over their collapsed iterations (OpenMP's ``for collapse(k) nowait``; the loops around it are
  run by every thread), scheduled ``static`` unless the string ends with
  ``@ schedule(kind[, chunk])`` (kind ``static``, ``dynamic`` or ``guided``).
- ``{R:n}`` / ``{C:n}`` after an upper-case letter: an explicit thread grid instead (001
  PAR-MODE 2): n rows (or columns) of threads, each taking one contiguous block of that loop's
  iterations; the nest then runs on R x C threads.
- ``|`` after a letter: all threads wait at a barrier each time that loop level completes.

``loop(body)`` calls ``body(ind)`` once per iteration, ``ind`` holding the current index of
every logical loop (the value of its innermost occurrence), on the nest's threads (Python
threads here: a Python body is for prototyping and slow, about a microsecond per call;
:func:`thread_num` tells a body its thread). docs/loops.md has the details.
"""
from __future__ import annotations

import functools
import operator
import re
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["LoopSpec", "ThreadedLoop", "thread_num", "parse"]

_FN = "pytpp.loops.ThreadedLoop"
_tls = threading.local()


def thread_num() -> int:
    """The number of the nest thread running the caller's body (0 outside a nest)."""
    return getattr(_tls, "tid", 0)


class LoopSpec:
    """One logical loop: ``range(start, end, step)``, with the block steps of its outer
    occurrences (``block_steps[j]`` is the step of occurrence j when the letter appears more
    than once; the last occurrence steps by ``step``).

    >>> from pytpp.loops import LoopSpec
    >>> LoopSpec(0, 8, 2, [4])
    LoopSpec(start=0, end=8, step=2, block_steps=(4,))
    """

    __slots__ = ("start", "end", "step", "block_steps")

    def __init__(self, start: int, end: int, step: int = 1, block_steps: Sequence[int] = ()):
        try:
            self.start = operator.index(start)
            self.end = operator.index(end)
            self.step = operator.index(step)
            self.block_steps = tuple(operator.index(b) for b in block_steps)
        except TypeError:
            raise TypeError("pytpp.loops.LoopSpec: start, end, step and block_steps must be "
                            "integers") from None

    def __repr__(self):
        return (f"LoopSpec(start={self.start}, end={self.end}, step={self.step}, "
                f"block_steps={self.block_steps})")

    def __eq__(self, other):
        return isinstance(other, LoopSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return (self.start, self.end, self.step, self.block_steps)


def _error(msg, text, pos, fn=_FN):
    caret = " " * pos + "^"
    return ValueError(f"{fn}: {msg} (character {pos})\n  {text}\n  {caret}")


@dataclass(frozen=True)
class Level:
    """One loop level of a parsed string."""
    loop: int           # logical loop (0 for a)
    occurrence: int     # 0 for the letter's first appearance
    pos: int            # where its letter is in the string
    parallel: bool
    grid: str | None    # "R" or "C" for an explicit thread grid
    ways: int
    barrier: bool       # a "|" follows


@dataclass(frozen=True)
class Parsed:
    text: str
    levels: tuple[Level, ...]
    schedule: str       # "static", "dynamic", "guided"
    chunk: int          # 0: the kind's default
    occurrences: tuple[int, ...]   # per logical loop seen
    nloops: int         # letters span a .. this


_SCHED = re.compile(r"\s*schedule\s*\(\s*(static|dynamic|guided)\s*(?:,\s*(\d+)\s*)?\)\s*")


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Parsed:
    """The parsed form of a loop-spec string (cached: each string is parsed once).

    >>> from pytpp.loops import parse
    >>> parse("bcaBCb").levels[3]
    Level(loop=1, occurrence=1, pos=3, parallel=True, grid=None, ways=0, barrier=False)
    """
    if not isinstance(text, str):
        raise TypeError(f"{_FN}: the loop-spec string must be a str, got {type(text).__name__}")
    at = text.find("@")
    body = text if at < 0 else text[:at]
    levels = []
    counts = {}
    i = 0
    while i < len(body):
        ch = body[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "|":
            if not levels:
                raise _error("'|' must follow a loop letter", text, i)
            if levels[-1].barrier:
                raise _error("two '|' after one loop", text, i)
            last = levels[-1]
            levels[-1] = Level(last.loop, last.occurrence, last.pos, last.parallel, last.grid,
                               last.ways, True)
            i += 1
            continue
        if ch == "{":
            m = re.match(r"\{([RC]):(\d+)\}", body[i:])
            if not m:
                raise _error("malformed thread grid: expected {R:n} or {C:n}", text, i)
            if not levels or levels[-1].barrier or levels[-1].grid:
                raise _error("a thread grid must follow its loop letter", text, i)
            last = levels[-1]
            if not last.parallel:
                raise _error(f"{{{m.group(1)}:n}} on the sequential loop "
                             f"{body[last.pos]!r}: a grid applies to an upper-case letter",
                             text, i)
            ways = int(m.group(2))
            if ways < 1:
                raise _error("a thread grid needs n >= 1", text, i + 3)
            levels[-1] = Level(last.loop, last.occurrence, last.pos, True, m.group(1), ways,
                               False)
            i += m.end()
            continue
        if not ("a" <= ch.lower() <= "z" and ch.isascii()):
            raise _error(f"unexpected character {ch!r}", text, i)
        loop = ord(ch.lower()) - ord("a")
        occ = counts.get(loop, 0)
        counts[loop] = occ + 1
        levels.append(Level(loop, occ, i, ch.isupper(), None, 0, False))
        i += 1
    if not levels:
        raise _error("no loop letters", text, 0 if at < 0 else at)
    schedule, chunk = "static", 0
    if at >= 0:
        m = _SCHED.fullmatch(text[at + 1:])
        if not m:
            rest = text[at + 1:]
            bad = len(rest) - len(rest.lstrip())
            raise _error("unknown directive: expected schedule(static|dynamic|guided[, chunk])",
                         text, at + 1 + bad)
        schedule = m.group(1)
        chunk = int(m.group(2) or 0)
        if m.group(2) is not None and chunk < 1:
            raise _error("the chunk size must be >= 1", text, at + 1 + m.start(2))
    # parallel loops: one group of consecutive upper-case letters, or a thread grid
    par = [k for k, lv in enumerate(levels) if lv.parallel]
    grids = [lv for lv in levels if lv.grid]
    if grids:
        for k in par:
            if not levels[k].grid:
                raise _error("an upper-case letter without {R:n}/{C:n} next to a thread grid",
                             text, levels[k].pos)
        seen = set()
        for lv in grids:
            if lv.grid in seen:
                raise _error(f"two loops on the {lv.grid} axis of the thread grid", text, lv.pos)
            seen.add(lv.grid)
        if at >= 0:
            raise _error("@ directives apply to the OpenMP mode, not to a thread grid", text, at)
    elif par:
        for a, b in zip(par, par[1:]):
            if b != a + 1:
                raise _error("parallel loops must be consecutive (one collapsed loop)", text,
                             levels[b].pos)
        for k in par[:-1]:
            if levels[k].barrier:
                raise _error("'|' inside the collapsed parallel loops", text,
                             text.index("|", levels[k].pos))
    # a barrier deeper than the parallel loops would be met a different number of times by the
    # threads (their shares differ): only at or outside them, or where the collapsed loop ends
    if par:
        first = par[0]
        last_ok = first if grids else par[-1]
        for k, lv in enumerate(levels):
            if lv.barrier and k > last_ok:
                raise _error("'|' inside the parallel loops: the threads would not meet there",
                             text, text.index("|", lv.pos))
    nloops = max(counts) + 1
    return Parsed(text, tuple(levels), schedule, chunk,
                  tuple(counts.get(k, 0) for k in range(nloops)), nloops)


class ThreadedLoop:
    """A loop nest: logical loops `specs` (letter a is specs[0]) instantiated by
    `spec_string` (see the module's grammar).

    Parameters
    ----------
    specs : sequence of LoopSpec
    spec_string : str
    num_threads : int, optional
        Threads of the OpenMP mode (default: pytpp's thread count); a thread grid runs on
        R x C threads.

    Examples
    --------
    >>> from pytpp.loops import LoopSpec, ThreadedLoop, thread_num
    >>> loop = ThreadedLoop([LoopSpec(0, 4)], "A{R:2}")
    >>> seen = []
    >>> loop(lambda ind: seen.append((thread_num(), ind[0])))
    >>> sorted(seen)
    [(0, 0), (0, 1), (1, 2), (1, 3)]
    """

    def __init__(self, specs: Sequence[LoopSpec], spec_string: str, *,
                 num_threads: int | None = None):
        specs = list(specs)
        for k, s in enumerate(specs):
            if not isinstance(s, LoopSpec):
                raise TypeError(f"{_FN}: specs[{k}] must be a LoopSpec, got {type(s).__name__}")
        p = parse(spec_string)
        text = spec_string
        for lv in p.levels:
            if lv.loop >= len(specs):
                raise _error(f"loop {text[lv.pos]!r} has no LoopSpec ({len(specs)} given)",
                             text, lv.pos)
        end = text.find("@") if "@" in text else len(text)
        for k, s in enumerate(specs):
            letter = chr(ord("a") + k)
            first = next((lv for lv in p.levels if lv.loop == k), None)
            if first is None:
                raise _error(f"LoopSpec {k} (letter {letter!r}) has no letter in the string",
                             text, end)
            if s.step <= 0:
                raise _error(f"loop {letter!r} has step {s.step}; steps must be > 0", text,
                             first.pos)
            occ = p.occurrences[k]
            if len(s.block_steps) < occ - 1:
                lv = [v for v in p.levels if v.loop == k][len(s.block_steps) + 1]
                raise _error(f"loop {letter!r} appears {occ} times but has "
                             f"{len(s.block_steps)} block steps (needs {occ - 1})", text, lv.pos)
            for j, b in enumerate(s.block_steps[:occ - 1]):
                if b <= 0:
                    lv = [v for v in p.levels if v.loop == k][j]
                    raise _error(f"loop {letter!r} has block step {b}; steps must be > 0",
                                 text, lv.pos)
        self.specs = tuple(specs)
        self.spec_string = spec_string
        self.parsed = p
        grid = {lv.grid: lv.ways for lv in p.levels if lv.grid}
        self.grid = (grid.get("R", 1), grid.get("C", 1)) if grid else None
        if self.grid:
            self.num_threads = self.grid[0] * self.grid[1]
        elif not any(lv.parallel for lv in p.levels):
            self.num_threads = 1     # no parallel loop: one thread runs the nest once
        else:
            if num_threads is None:
                from pytpp._core import _runtime
                num_threads = _runtime.effective_num_threads()
            self.num_threads = max(1, operator.index(num_threads))

    def __repr__(self):
        return f"ThreadedLoop({list(self.specs)!r}, {self.spec_string!r})"

    # -- the nest in C -----------------------------------------------------------------------
    def c_nest(self):
        """The nest as the C engine runs it (pytpp._core._loops.CNest; built once): C bodies
        (the blocked GEMM of ``pytpp.matmul(..., loops=...)``) run in it with no Python."""
        got = getattr(self, "_c_nest", None)
        if got is None:
            from pytpp._core import _loops
            p = self.parsed
            levels = []
            for lv in p.levels:
                s = self.specs[lv.loop]
                occ = p.occurrences[lv.loop]
                step = s.step if lv.occurrence == occ - 1 else s.block_steps[lv.occurrence]
                block = 0 if lv.occurrence == 0 else s.block_steps[lv.occurrence - 1]
                par = (0 if not lv.parallel else 1 if lv.grid is None
                       else 2 if lv.grid == "R" else 3)
                levels.append((lv.loop, int(lv.occurrence == 0), step, block, par,
                               int(lv.barrier)))
            sched = {"static": 0, "dynamic": 1, "guided": 2}[p.schedule]
            r, c = self.grid if self.grid else (0, 0)
            got = _loops.CNest(levels, [s.start for s in self.specs],
                               [s.end for s in self.specs], sched, p.chunk, r, c)
            self._c_nest = got
        return got

    def run_equation(self, f, *inputs, out=None, tile: tuple[int, int], rows: int = 0,
                     cols: int = 1):
        """A C body: the compiled equation `f` (``pytpp.tpp.equation.compile``) on the tile of
        rows ``[ind[rows], + tile[0])`` and columns ``[ind[cols], + tile[1])`` of the result at
        every iteration of the nest, no Python in the loop. The logical loops `rows` and `cols`
        run over row and column starts (``LoopSpec(0, m, tile[0])``, ...); inputs broadcast as
        in ``f(*inputs)``. Trees with products are refused, and row reductions unless a tile
        spans whole rows. Returns `out` (a new array when None).

        >>> import numpy as np
        >>> from pytpp.loops import LoopSpec, ThreadedLoop
        >>> from pytpp.tpp import equation as eq
        >>> f = eq.compile(eq.relu(eq.input(0)) * 2.0, shape=(4, 6), dtype=np.float64)
        >>> loop = ThreadedLoop([LoopSpec(0, 4, 2), LoopSpec(0, 6, 3)], "AB")
        >>> loop.run_equation(f, np.arange(-12.0, 12.0).reshape(4, 6), tile=(2, 3))[3]
        array([12., 14., 16., 18., 20., 22.])
        """
        fn = "pytpp.loops.ThreadedLoop.run_equation"
        from pytpp.tpp.equation import Equation
        if not isinstance(f, Equation):
            raise TypeError(f"{fn}: f must be a compiled equation, got {type(f).__name__}")
        bm, bn = (operator.index(t) for t in tile)
        if bm < 1 or bn < 1:
            raise ValueError(f"{fn}: tile must be positive, got {tile}")
        for name, k in (("rows", rows), ("cols", cols)):
            if not 0 <= k < len(self.specs):
                raise ValueError(f"{fn}: {name}={k} names no logical loop")
        if f.matmul_inputs:
            raise ValueError(f"{fn}: an equation with products cannot run per tile")
        m, n = f.shape
        got = f._prepare(inputs, out)
        if got[0] is None:
            return got[1]
        prog, ops, specs, target, strategy = got
        if f._has_reduce() and bn < n:
            raise ValueError(f"{fn}: the equation reduces rows: a tile must span them "
                             f"(tile[1] >= {n})")
        from pytpp.tpp.equation import _STORE
        self.c_nest().equation(self.num_threads, prog, ops, specs, target, _STORE[f.dtype],
                               strategy, rows, cols, bm, bn)
        if out is not None and target is not out:
            out[...] = target
            return out
        return target

    def trace(self) -> dict[int, list[tuple[int, ...]]]:
        """{thread: the indices it visits, in order} as the C engine runs the nest (a C body
        recording them): the order a C body such as the loop-string GEMM sees."""
        total = 1
        for s in self.specs:
            total *= max(1, len(range(s.start, s.end, s.step)))
        rows = self.c_nest().trace(self.num_threads, total * self.num_threads + 1)
        out: dict[int, list[tuple[int, ...]]] = {}
        for row in rows.tolist():
            out.setdefault(row[0], []).append(tuple(row[1:]))
        return out

    # -- the nest ----------------------------------------------------------------------------
    def _range(self, lv, outer):
        """The values of level lv given the enclosing occurrence's value (None: first)."""
        s = self.specs[lv.loop]
        occ = self.parsed.occurrences[lv.loop]
        step = s.step if lv.occurrence == occ - 1 else s.block_steps[lv.occurrence]
        if lv.occurrence == 0:
            return range(s.start, s.end, step)
        prev = s.block_steps[lv.occurrence - 1]
        return range(outer, min(outer + prev, s.end), step)

    def __call__(self, body: Callable[[tuple[int, ...]], object],
                 init: Callable[[], object] | None = None,
                 term: Callable[[], object] | None = None) -> None:
        """Runs the nest: ``body(ind)`` per iteration; `init` and `term` once per thread before
        and after it (001 section II-C)."""
        nt = self.num_threads
        state = _Shared(nt)
        errors = []

        def run(tid):
            _tls.tid = tid
            try:
                if init is not None:
                    init()
                self._walk(0, [None] * len(self.specs), tid, state, body)
                if term is not None:
                    term()
            except BaseException as e:   # noqa: BLE001 (re-raised in the caller)
                errors.append(e)
                state.abort()
            finally:
                _tls.tid = 0

        if nt == 1:
            run(0)
        else:
            threads = [threading.Thread(target=run, args=(t,)) for t in range(1, nt)]
            for th in threads:
                th.start()
            run(0)
            for th in threads:
                th.join()
        if errors:
            first = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)),
                         errors[0])
            raise first

    def _walk(self, k, cur, tid, state, body):
        levels = self.parsed.levels
        if k == len(levels):
            body(tuple(cur))
            return
        lv = levels[k]
        if lv.parallel and not lv.grid:
            # the collapsed group (one OpenMP "for collapse(j - k) nowait"): this thread's share
            j = k
            while j < len(levels) and levels[j].parallel:
                j += 1
            enc = state.encounter(tid, k)
            saved = list(cur)
            for vals in self._share(self._group_space(k, j, cur), tid, state, (k, enc)):
                for lvl, v in zip(levels[k:j], vals):
                    cur[lvl.loop] = v
                self._walk(j, cur, tid, state, body)
            cur[:] = saved
            if levels[j - 1].barrier:
                state.wait()
            return
        vals = self._range(lv, cur[lv.loop])
        if lv.grid:
            r, c = self.grid
            part, ways = (tid // c, r) if lv.grid == "R" else (tid % c, c)
            base, extra = divmod(len(vals), ways)
            start = part * base + min(part, extra)
            vals = vals[start:start + base + (part < extra)]
        saved = cur[lv.loop]
        for v in vals:
            cur[lv.loop] = v
            self._walk(k + 1, cur, tid, state, body)
        cur[lv.loop] = saved
        if lv.barrier:
            state.wait()

    def _group_space(self, k, j, cur):
        """The collapsed iterations of levels [k, j): tuples of their values in nest order."""
        levels = self.parsed.levels
        cur = list(cur)
        space = []

        def rec(q, vals):
            if q == j:
                space.append(tuple(vals))
                return
            lv = levels[q]
            saved = cur[lv.loop]
            for v in self._range(lv, cur[lv.loop]):
                cur[lv.loop] = v
                vals.append(v)
                rec(q + 1, vals)
                vals.pop()
            cur[lv.loop] = saved

        rec(k, [])
        return space

    def _share(self, space, tid, state, key):
        """This thread's iterations of a work-shared loop, in order, under the schedule."""
        nt, n = self.num_threads, len(space)
        kind, chunk = self.parsed.schedule, self.parsed.chunk
        if kind == "static":
            if chunk == 0:    # one contiguous block per thread, the first n % nt one longer
                base, extra = divmod(n, nt)
                start = tid * base + min(tid, extra)
                yield from space[start:start + base + (tid < extra)]
            else:             # chunks dealt round robin
                for c0 in range(tid * chunk, n, nt * chunk):
                    yield from space[c0:c0 + chunk]
            return
        while True:           # dynamic / guided: chunks taken in order from a shared counter
            with state.lock:
                pos = state.counters.get(key, 0)
                if pos >= n:
                    return
                size = max(chunk, 1)
                if kind == "guided":
                    size = max(size, -(-(n - pos) // nt))
                state.counters[key] = pos + size
            yield from space[pos:pos + size]


class _Shared:
    """What the nest's threads share: the barrier and the dynamic schedules' counters."""

    def __init__(self, nt):
        self.barrier = threading.Barrier(nt) if nt > 1 else None
        self.lock = threading.Lock()
        self.counters = {}
        self.seen = {}

    def encounter(self, tid, k):
        """How many times thread tid reached the work-shared loop at level k before: every
        thread meets it equally often, so (k, encounter) names one instance of it."""
        key = (tid, k)
        e = self.seen.get(key, 0)
        self.seen[key] = e + 1
        return e

    def wait(self):
        if self.barrier is not None:
            self.barrier.wait()

    def abort(self):
        if self.barrier is not None:
            self.barrier.abort()
