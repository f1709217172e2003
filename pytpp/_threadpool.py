"""threadpoolctl integration: `threadpool_limits(1)` limits pytpp like it limits BLAS and OpenMP."""
import threadpoolctl

from pytpp._core import _runtime
from pytpp._version import __version__


class PytppController(threadpoolctl.LibController):
    user_api = "pytpp"
    internal_api = "pytpp"
    # threadpoolctl finds controllers by the file name of a loaded shared library: the runtime
    # extension module that holds the thread count.
    filename_prefixes = ("_runtime",)

    def get_num_threads(self):
        return _runtime.get_num_threads()

    def set_num_threads(self, num_threads):
        _runtime.set_num_threads(max(1, int(num_threads)))

    def get_version(self):
        return __version__


def register():
    if getattr(threadpoolctl, "register", None) is None:  # threadpoolctl < 3.5: no custom controllers
        return False
    if PytppController not in threadpoolctl._ALL_CONTROLLERS:
        threadpoolctl.register(PytppController)
    return True
