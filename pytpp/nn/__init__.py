"""pytpp.nn: planned (see the open issues); nothing is exported yet."""
