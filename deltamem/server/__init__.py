"""The service: REST API (FastAPI), memory inspector (/ui), MCP server (official SDK)
and the background worker, over one `Memory`, scoped by tenant (API key) and user.

Needs the ``server`` extra (fastapi, uvicorn, mcp). The CLI calls `serve`, `serve_ui`,
`serve_mcp` and `work` (extra worker processes); `create_app` /
`create_mcp_server` build the apps for embedding or
tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Worker",
    "create_app",
    "create_mcp_server",
    "load_keys",
    "serve",
    "serve_mcp",
    "serve_ui",
    "work",
]

if TYPE_CHECKING:
    from deltamem.server.app import create_app
    from deltamem.server.config import load_keys
    from deltamem.server.mcp_server import create_mcp_server
    from deltamem.server.run import serve, serve_mcp, serve_ui, work
    from deltamem.server.worker import Worker

_WHERE = {
    "create_app": "deltamem.server.app",
    "create_mcp_server": "deltamem.server.mcp_server",
    "load_keys": "deltamem.server.config",
    "serve": "deltamem.server.run",
    "serve_mcp": "deltamem.server.run",
    "serve_ui": "deltamem.server.run",
    "work": "deltamem.server.run",
    "Worker": "deltamem.server.worker",
}


def __getattr__(name: str) -> Any:  # lazy: `import deltamem.server` stays cheap
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(name)
