"""The package version, in one place (read by pytpp, its command line and the build)."""
__version__ = "0.1.0"
