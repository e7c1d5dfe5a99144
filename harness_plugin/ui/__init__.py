"""`artmem ui`: a local, read-only page for the project's catalog, and the notebook's HTML.

    server = CatalogServer(Site(store, catalog, limits))   # 127.0.0.1, a random token
    print(server.url); server.serve_forever()

`card_html`, `hits_html` and `rows_html` are the renderers the page uses, for Jupyter's
`_repr_html_`.
"""

from __future__ import annotations

import webbrowser
from typing import TYPE_CHECKING, TextIO

from harness_plugin.ui._notebook import Preview, SearchHits, card_html, hits_html, rows_html

if TYPE_CHECKING:
    from cas import Store
    from harness_plugin._runtime import Runtime


def serve_ui(runtime: Runtime, store: Store, *, port: int, open_browser: bool, out: TextIO) -> None:
    """Serve the page until interrupted, printing its address (with its token) first."""
    from cas import LocalCatalog
    from harness_plugin.ui._pages import Site
    from harness_plugin.ui._server import CatalogServer

    catalog = LocalCatalog.open(store, runtime.config.state_root)
    site = Site(store, catalog, runtime.config.slice.resolve())
    server = CatalogServer(site, port)
    out.write(f"artmem ui: serving {store.project_id} read-only at\n  {server.url}\n")
    out.write("press Ctrl-C to stop\n")
    out.flush()
    if open_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


__all__ = ["Preview", "SearchHits", "card_html", "hits_html", "rows_html", "serve_ui"]
