"""Build of pytpp's C engine and Cython glue.

One portable build: every ISA level's kernels are compiled with that level's flags only (one
static library per level), never -march=native; the choice among them is made at run time.
Cython-generated C gets no ISA flags at all.
"""
import os
import re
import sys
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CORE = "pytpp/_core"
INCLUDE = [f"{CORE}/include"]
COMMON = ["-O3", "-fPIC", "-std=gnu11", "-fno-math-errno", "-Wall", "-Wno-unused-function"]

AVX2 = ["-mavx2", "-mfma", "-mf16c"]
AVX512 = AVX2 + ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"]
# level name -> (source folder, flags). Kernels of a level run only after the cpuid check.
LEVELS = {
    "ref": (f"{CORE}/ref", []),
    "avx2": (f"{CORE}/kernels/avx2", AVX2),
    "avx512": (f"{CORE}/kernels/avx512", AVX512),
    "avx512_bf16": (f"{CORE}/kernels/avx512_bf16", AVX512 + ["-mavx512bf16"]),
    "avx512_vnni": (f"{CORE}/kernels/avx512_vnni", AVX512 + ["-mavx512vnni"]),
}


INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"(pytpp/[^"]+)"', re.M)


def header_deps(source, _seen=None):
    """Every project header `source` includes, directly or through other headers: editing
    gemm_ukr.inc must rebuild the kernels that use it (build_clib otherwise only compares each
    .c with its .o), and only those."""
    seen = set() if _seen is None else _seen
    with open(source) as f:
        text = f.read()
    for name in INCLUDE_RE.findall(text):
        path = os.path.join(INCLUDE[0], name)
        if path not in seen and os.path.exists(path):
            seen.add(path)
            header_deps(path, seen)
    return sorted(seen)


def c_library(name, sources, cflags):
    return (name, {"sources": sources, "include_dirs": INCLUDE, "cflags": cflags,
                   "obj_deps": {src: header_deps(src) for src in sources}})


def c_libraries():
    libs = []
    for name, (folder, flags) in LEVELS.items():
        sources = sorted(glob(f"{folder}/*.c"))
        if sources:
            libs.append(c_library(f"pytpp_{name}", sources, COMMON + flags))
    # loop drivers, packing, cpu detection: portable C with OpenMP, no ISA flags
    libs.append(c_library("pytpp_frame", sorted(glob(f"{CORE}/frame/*.c")),
                          COMMON + ["-fopenmp"]))
    return libs


def extensions():
    exts = []
    for pyx in sorted(glob("pytpp/**/*.pyx", recursive=True)):
        module = pyx[:-4].replace(os.sep, ".")
        exts.append(Extension(
            module, [pyx],
            include_dirs=INCLUDE + [np.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
            extra_compile_args=["-O2", "-fopenmp", "-Wno-unused-function"],
            extra_link_args=["-fopenmp"],
        ))
    return cythonize(exts, compiler_directives={"language_level": 3},
                     nthreads=int(os.environ.get("PYTPP_BUILD_JOBS", "0")) or None)


if sys.platform != "linux" and not os.environ.get("PYTPP_FORCE_BUILD"):
    print("pytpp: only x86-64 Linux with gcc is supported; set PYTPP_FORCE_BUILD=1 to try anyway")

class BuildExtWithLibs(build_ext):
    """`build_ext` (also `--inplace` and editable installs) builds the kernel libraries first."""

    def run(self):
        if self.distribution.has_c_libraries():
            clib = self.get_finalized_command("build_clib")
            clib.force = clib.force or self.force
            self.run_command("build_clib")
            # relink every extension when a kernel library changed
            archives = [os.path.join(clib.build_clib, f"lib{name}.a")
                        for name, _ in self.distribution.libraries]
            for ext in self.extensions:
                ext.depends = list(ext.depends) + archives
        super().run()


setup(libraries=c_libraries(), ext_modules=extensions(), cmdclass={"build_ext": BuildExtWithLibs})
