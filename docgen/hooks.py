"""MkDocs hooks (``mkdocs.yml``: ``hooks``): generated parts in, and the public API checked.

- ``<!-- gen: KIND ARG -->`` on a line of its own is replaced by ``generate.GENERATORS[KIND](ARG)``.
- Every name in the ``__all__`` of a public module needs a docstring, every public module a
  reference page that renders it (``::: module``), and that page an entry for each of those
  names; what misses one is a warning, which ``mkdocs build --strict`` makes an error.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ASYNCFLOW_EARLY_FORK_SERVER", "0")  # the build imports the algorithms; it runs none of them

from docgen.generate import GENERATORS, GenerationError
from docgen.public import PUBLIC, undocumented

log = logging.getLogger("mkdocs.hooks.asyncflow")

MARKER = re.compile(r"^<!-- gen: (\w+) ?([^ ]*) -->$", re.M)


def on_files(files: Any, config: Any) -> Any:
    rendered = set()
    for file in files.documentation_pages():
        if file.src_uri.startswith("reference/"):
            rendered |= set(re.findall(r"^::: ([\w.]+)", Path(file.abs_src_path).read_text(), re.M))
    for module in PUBLIC:
        if module not in rendered:
            log.warning("public module %s has no reference page (one under reference/ with '::: %s')", module, module)
        for name in undocumented(module):
            log.warning("public name %s has no docstring", name)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind not in GENERATORS:
            log.warning("%s: unknown generated part %r", page.file.src_uri, kind)
            return match.group(0)
        try:
            return GENERATORS[kind](arg)
        except GenerationError as exc:
            log.warning("%s: %s", page.file.src_uri, exc)
            return match.group(0)

    return MARKER.sub(generated, markdown)


def on_post_page(output: str, page: Any, config: Any) -> str:
    if not page.file.src_uri.startswith("reference/"):
        return output
    anchors = set(re.findall(r'id="([\w.]+)"', output))
    for module_name in re.findall(r"^::: ([\w.]+)", page.file.content_string, re.M):
        if module_name not in PUBLIC:
            continue
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            where = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
            if f"{module_name}.{name}" not in anchors and where not in anchors:
                log.warning("%s: public name %s.%s is not rendered", page.file.src_uri, module_name, name)
    return output
