"""Command line: `python -m pytpp info | bench CASE... | bench compare A B | demo | tune gemm M N K`."""
import argparse
import sys


def _info(args):
    from pytpp import _info
    if args.kernel_map:
        sys.stdout.write(_info.kernel_map())
        return
    _info.show_config()
    if args.kernels:
        _info.print_kernels()
        return
    print("measuring peaks (FMA loops, memory bandwidth) ...", flush=True)
    _info.print_measured(_info.measure(quick=args.quick))


def _demo(args):
    from pytpp import _demo
    _demo.main()


def _bench(args):
    from pytpp.benchmarks import run
    if args.list:
        print("\n".join(run.available()))
        return 0
    if args.cases[:1] == ["compare"]:
        if len(args.cases) != 3:
            raise SystemExit("usage: python -m pytpp bench compare A.json B.json")
        from pytpp.benchmarks import _compare
        return _compare.main(*args.cases[1:])
    return run.main(args.cases, threads=args.threads, quick=args.quick, repeats=args.repeats,
                    json_path=args.json, plot_path=args.plot, match=args.match)


def _tune(args):
    from pytpp import _tune
    return _tune.main(args.rest)


def _version():
    from pytpp._version import __version__
    return __version__


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pytpp", description=__doc__)
    p.add_argument("--version", action="version", version=f"pytpp {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("info", help="CPU, ISA level, caches, threads and measured peaks")
    pi.add_argument("--quick", action="store_true", help="shorter measurement")
    pi.add_argument("--kernels", action="store_true",
                    help="print the kernel each op family runs at the active ISA level (no "
                         "measurement)")
    pi.add_argument("--kernel-map", action="store_true",
                    help="print every kernel symbol of every level as Markdown (docs/kernels.md)")
    pi.set_defaults(fn=_info)
    pd = sub.add_parser("demo", help="a short tour on built-in random data against numpy "
                                     "(matmul, small GEMMs, a fused MLP, layer_norm, softmax, "
                                     "BRGEMM at every ISA level)")
    pd.set_defaults(fn=_demo)
    pb = sub.add_parser("bench", help="benchmarks against numpy/scipy/torch, in one run; "
                                      "`bench compare A.json B.json` compares two reports",
                        usage="python -m pytpp bench [CASE ...] [options]\n"
                              "       python -m pytpp bench compare A.json B.json")
    pb.add_argument("cases", nargs="*", help="benchmark names (default: all but dask); see --list")
    pb.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    pb.add_argument("--threads", default="1", help="comma-separated thread counts, e.g. 1,2")
    pb.add_argument("--quick", action="store_true", help="fewer repetitions and sizes")
    pb.add_argument("--repeats", type=int, default=None, help="timed repetitions per case")
    pb.add_argument("--match", metavar="TEXT", default=None,
                    help="time only the cases whose name contains TEXT")
    pb.add_argument("--json", metavar="FILE", default=None,
                    help="write a report: machine (CPU, ISA level, peaks, versions, date) and "
                         "every row")
    pb.add_argument("--plot", metavar="FILE.png", default=None,
                    help="draw a roofline and a speedup-vs-best-peer chart (needs matplotlib: "
                         "pip install 'pytpp[plot]')")
    pb.set_defaults(fn=_bench)
    pt = sub.add_parser("tune", help="autotune the loop string of a GEMM: `tune gemm M N K` "
                                     "(model ranking, top classes timed, best kept)",
                        add_help=False)
    pt.add_argument("rest", nargs=argparse.REMAINDER)
    pt.set_defaults(fn=_tune)
    args = p.parse_args(argv)
    return args.fn(args) or 0


if __name__ == "__main__":
    sys.exit(main())
