"""Sphinx settings of the course site (`make docs`; docs/build_site.py stages the pages, then builds)."""

import importlib.util
import os
from pathlib import Path

project = "Multi-GPU Training with PyTorch"
author = "the course's authors"
extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3  # links to a guide's sections (instructor.md#shards) resolve
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
# Widgets need a kernel and scripts from a CDN: pages load neither, and say where to use them.
nb_ipywidgets_js = {}

# Lessons run when COURSE_SITE_EXECUTE names them (docs/build_site.py --execute), cached between builds;
# answer and test cells are stubs on the release, so their errors are expected and not shown.
_run = os.environ.get("COURSE_SITE_EXECUTE", "").split()
nb_execution_mode = "cache" if _run else "off"
nb_execution_excludepatterns = [] if "all" in _run else \
    [f"lessons/{p.stem}.ipynb" for p in Path(os.environ.get("COURSE_SITE_SRC", ".")).glob("lessons/*.ipynb")
     if p.stem not in _run]
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_cache_path = os.environ.get("COURSE_SITE_CACHE", "")

html_theme = "sphinx_book_theme"
html_title = project
html_theme_options = {"show_toc_level": 2, "navigation_with_keys": False}
# MathJax 3 from a package (sphinx-mathjax-offline ships its files), not a CDN: the site reads
# offline. Its SVG build needs no font files.
html_static_path = [str(Path(importlib.util.find_spec("sphinx-mathjax-offline").origin).parent / "static")]
mathjax_path = "mathjax/tex-svg.js"
