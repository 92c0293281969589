"""The gateway's app on Granian (ASGI, one worker), for `bench/bench_floor.py --granian` only: what the front
would cost if `serve` ran on Granian instead of uvicorn (docs/architecture.md, "The HTTP front").

    .venv/bin/python bench/granian_gateway.py PORT PROJECT_DIR STATE_ROOT [BEARER_TOKEN]

Not a way to serve: it has none of `serve`'s own front (the per-connection head, body and idle timeouts,
the connection cap, the peer's uid for loopback-strict), so it runs with a bearer token or on loopback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def app() -> Any:
    """Granian's factory target: `create_app` on $BENCH_PROJECT, as `serve` builds it."""
    from connections import load_project
    from gateway.app import create_app
    from gateway.settings import ServeSettings

    token = os.environ.get("BENCH_TOKEN")
    settings = ServeSettings(
        state_root=Path(os.environ["BENCH_STATE_ROOT"]),
        port=int(os.environ["BENCH_PORT"]),
        bearer_tokens=(token,) if token else (),
        allow_anonymous=not token,
    )
    return create_app(load_project(Path(os.environ["BENCH_PROJECT"])), settings)


def main() -> None:
    from granian import Granian

    port, project, state = sys.argv[1:4]
    os.environ |= {"BENCH_PORT": port, "BENCH_PROJECT": project, "BENCH_STATE_ROOT": state}
    if len(sys.argv) > 4:
        os.environ["BENCH_TOKEN"] = sys.argv[4]
    os.environ["PYTHONPATH"] = str(ROOT)
    Granian(
        "bench.granian_gateway:app", address="127.0.0.1", port=int(port), interface="asgi", workers=1,
        loop="uvloop", http="1", factory=True, log_enabled=False, working_dir=ROOT,
    ).serve()  # fmt: skip


if __name__ == "__main__":
    main()
