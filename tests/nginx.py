"""The one nginx main configuration our tests and benchmarks run (Debian's nginx, as our own user).

No pytest here: `bench/` imports it too.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["main_conf"]


def main_conf(folder: Path, http: str, *, error_log: str = "") -> str:
    """One worker, every file under `folder` (pid, error log, temp paths); `http` is the `http` block's body."""
    return f"""
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log {error_log};
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    {http}
}}
"""
