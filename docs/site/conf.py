"""Sphinx configuration of pytpp's documentation site: the API reference from the numpydoc
docstrings and the Markdown notes of docs/ as pages (`python -m sphinx -W -b html docs/site
build/docs`)."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import pytpp  # noqa: E402

# every Markdown note of docs/ becomes a page: a stub per note that includes it (written here, at
# configuration time, so a new note needs no edit of the site)
_HERE = os.path.dirname(os.path.abspath(__file__))
_NOTES = os.path.join(_HERE, "notes")
os.makedirs(_NOTES, exist_ok=True)
for _name in sorted(os.listdir(os.path.join(_HERE, ".."))):
    if _name.endswith(".md"):
        _stub = f"```{{include}} ../../{_name}\n```\n"
        _path = os.path.join(_NOTES, _name)
        if not os.path.exists(_path) or open(_path).read() != _stub:
            with open(_path, "w") as _f:
                _f.write(_stub)

project = "pytpp"
release = version = pytpp.__version__
extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_default_options = {"members": True, "undoc-members": False}
# the notes link to source files and each other by relative paths outside the site
suppress_warnings = ["myst.xref_missing", "myst.header"]
html_theme = "alabaster"
