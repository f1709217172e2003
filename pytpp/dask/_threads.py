"""Threads of pytpp on dask workers: each worker process runs pytpp with the threads the worker
was given, never one thread per core in every process of a host."""
try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - dask without distributed
    WorkerPlugin = object

import pytpp


class PytppThreads(WorkerPlugin):
    """A worker plugin: at worker start, ``pytpp.set_num_threads(nthreads)`` where nthreads is
    the worker's own (``threads_per_worker`` / ``--nthreads``), or `threads` when given.

    The task functions of pytpp.dask do the same on their first call in a process, so the plugin
    only matters for user tasks that call pytpp directly.
    """

    name = "pytpp-threads"

    def __init__(self, threads=None):
        self.threads = threads

    def setup(self, worker):
        pytpp.set_num_threads(self.threads or worker.state.nthreads)


def register(client, threads=None):
    """Install :class:`PytppThreads` on every worker of `client` (and on workers that join).

    Examples
    --------
    >>> from distributed import Client, LocalCluster        # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
    >>> pytpp.dask.register(client)                         # doctest: +SKIP
    """
    client.register_plugin(PytppThreads(threads))
