"""Settings read from the environment, in one place.

| variable | meaning | default |
| --- | --- | --- |
| PYRECALL_DSN | any PostgreSQL server (instead of the embedded one) | unset: embedded |
| PYRECALL_DATA_DIR | where the embedded server keeps its data | ``./.pyrecall`` |
| PYRECALL_EMBED_MODEL | embedding model (``local/all-MiniLM-L6-v2``, ``openai/text-embedding-3-small``, ...) | ``local/all-MiniLM-L6-v2`` |
| PYRECALL_AGENT | the agent a CLI command acts for | ``claude-code`` |
"""

import os
from pathlib import Path

DEFAULT_MODEL = "local/all-MiniLM-L6-v2"
DEFAULT_AGENT = "claude-code"
DEFAULT_DIM = 384


def dsn_from_env() -> str | None:
    return os.environ.get("PYRECALL_DSN") or None


def data_dir() -> Path:
    return Path(os.environ.get("PYRECALL_DATA_DIR") or ".pyrecall").expanduser().resolve()


def embed_model() -> str:
    return os.environ.get("PYRECALL_EMBED_MODEL") or DEFAULT_MODEL


def default_agent() -> str:
    return os.environ.get("PYRECALL_AGENT") or DEFAULT_AGENT
