"""Build of pytpp's C engine and Cython glue.

One portable build: every ISA level's kernels are compiled with that level's flags only (one
static library per level), never -march=native; the choice among them is made at run time.
Cython-generated C gets no ISA flags at all.
"""
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext
from setuptools.modified import newer_group

CORE = "pytpp/_core"
INCLUDE = [f"{CORE}/include"]
COMMON = ["-O3", "-fPIC", "-std=gnu11", "-fno-math-errno", "-Wall", "-Wno-unused-function"]

# PYTPP_SANITIZE=address (or undefined, or both comma-separated) instruments every C and Cython
# object for a sanitizer run of the test suite (docs/testing.md); never for a release build.
SANITIZE = [s.strip() for s in os.environ.get("PYTPP_SANITIZE", "").split(",") if s.strip()]
SANITIZE_FLAGS = ([f"-fsanitize={','.join(SANITIZE)}", "-fno-omit-frame-pointer", "-g"]
                  if SANITIZE else [])
if SANITIZE:   # -O1, as the sanitizers advise: -O3 with ASan takes the kernel files 20+ minutes each
    COMMON = [f for f in COMMON if f != "-O3"] + ["-O1"] + SANITIZE_FLAGS
# Python's own CFLAGS carry -g: with it every extension that links the dispatch table (all the
# kernels) weighed 119 MB, and a wheel 172 MB. No debug info outside sanitizer builds.
NO_DEBUG = [] if SANITIZE else ["-g0"]
COMMON = COMMON + NO_DEBUG

AVX2 = ["-mavx2", "-mfma", "-mf16c"]
AVX512 = AVX2 + ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"]
# level name -> (source folder, flags). Kernels of a level run only after the cpuid check.
LEVELS = {
    "ref": (f"{CORE}/ref", []),
    "avx2": (f"{CORE}/kernels/avx2", AVX2),
    "avx512": (f"{CORE}/kernels/avx512", AVX512),
    "avx512_bf16": (f"{CORE}/kernels/avx512_bf16", AVX512 + ["-mavx512bf16"]),
    "avx512_vnni": (f"{CORE}/kernels/avx512_vnni", AVX512 + ["-mavx512vnni"]),
    "avx_vnni": (f"{CORE}/kernels/avx_vnni", AVX2 + ["-mavxvnni"]),
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
    # loop drivers, packing, cpu detection and the dispatch table: portable C with OpenMP, no ISA
    # flags. First on the link line: the dispatch table references every level's kernels.
    libs = [c_library("pytpp_frame", sorted(glob(f"{CORE}/frame/*.c")), COMMON + ["-fopenmp"])]
    for name, (folder, flags) in LEVELS.items():
        sources = sorted(glob(f"{folder}/*.c"))
        if sources:
            libs.append(c_library(f"pytpp_{name}", sources, COMMON + flags))
    return libs


def extensions():
    exts = []
    for pyx in sorted(glob("pytpp/**/*.pyx", recursive=True)):
        module = pyx[:-4].replace(os.sep, ".")
        exts.append(Extension(
            module, [pyx],
            include_dirs=INCLUDE + [np.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
            extra_compile_args=(["-O1" if SANITIZE else "-O2", "-fopenmp", "-Wno-unused-function"]
                                + SANITIZE_FLAGS + NO_DEBUG),
            extra_link_args=["-fopenmp"] + SANITIZE_FLAGS,
        ))
    return cythonize(exts, compiler_directives={"language_level": 3},
                     nthreads=build_jobs())


if sys.platform != "linux" and not os.environ.get("PYTPP_FORCE_BUILD"):
    print("pytpp: only x86-64 Linux with gcc is supported; set PYTPP_FORCE_BUILD=1 to try anyway")

def build_jobs():
    return int(os.environ.get("PYTPP_BUILD_JOBS", "0")) or os.cpu_count() or 1


def sanitized_dir(path):
    """Objects of a sanitizer build live apart from plain ones: switching PYTPP_SANITIZE on or
    off never links a mix of the two."""
    return f"{path}-sanitize-{'-'.join(SANITIZE)}" if SANITIZE else path


class ParallelBuildClib(build_clib):
    """Compiles the kernel sources of every library at once, on all cores (the serial build took
    8 minutes), and only the objects older than their source or one of the headers it includes."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = sanitized_dir(self.build_temp)
        self.build_clib = sanitized_dir(self.build_clib)

    def build_libraries(self, libraries):
        jobs = []
        for name, info in libraries:
            deps = info.get("obj_deps", {})
            for src in sorted(info["sources"]):
                obj = self.compiler.object_filenames([src], output_dir=self.build_temp)[0]
                if self.force or newer_group([src, *deps.get(src, [])], obj):
                    jobs.append((src, info))

        def compile_one(job):
            src, info = job
            self.compiler.compile([src], output_dir=self.build_temp,
                                  include_dirs=info.get("include_dirs"),
                                  extra_postargs=info.get("cflags"), debug=self.debug)

        with ThreadPoolExecutor(build_jobs()) as pool:
            list(pool.map(compile_one, jobs))  # list(): re-raise the first compile error
        for name, info in libraries:
            objects = self.compiler.object_filenames(sorted(info["sources"]),
                                                     output_dir=self.build_temp)
            self.compiler.create_static_lib(objects, name, output_dir=self.build_clib,
                                            debug=self.debug)


class BuildExtWithLibs(build_ext):
    """`build_ext` (also `--inplace` and editable installs) builds the kernel libraries first."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = sanitized_dir(self.build_temp)
        if not self.parallel:
            self.parallel = build_jobs()

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


setup(libraries=c_libraries(), ext_modules=extensions(), cmdclass={"build_ext": BuildExtWithLibs, "build_clib": ParallelBuildClib})
