"""Write the demo transcripts in ``examples/sessions/acme-api/``: four Claude Code sessions of
an agent working on "acme-api", a FastAPI service, on branch feature/auth, in March 2026.

    python examples/make_sessions.py

The output is deterministic (ids are uuid5 of fixed names), so re-running it changes nothing.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent / "sessions" / "acme-api"
CWD = "/home/dev/acme-api"
BRANCH = "feature/auth"
MODEL = "claude-sonnet-4-5-20250929"
NS = uuid.UUID("6f2b8a90-0c1d-4e5f-8a7b-9c0d1e2f3a4b")


class Session:
    """Builds the lines of one transcript, the way Claude Code writes them: one content block
    per assistant line, tool results as user lines, a parent chain of uuids."""

    def __init__(self, name: str, start: str):
        self.name = name
        self.sid = str(uuid.uuid5(NS, name))
        self.t = datetime.fromisoformat(start).replace(tzinfo=UTC)
        self.lines: list[dict] = []
        self.parent: str | None = None
        self.n = 0
        self.turn = 0
        self.tools = 0

    def _uuid(self) -> str:
        self.n += 1
        return str(uuid.uuid5(NS, f"{self.name}/{self.n}"))

    def _time(self, seconds: float) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _line(self, kind: str, message: dict, seconds: float, **extra) -> None:
        uid = self._uuid()
        self.lines.append({
            "parentUuid": self.parent, "isSidechain": False, "userType": "external",
            "cwd": CWD, "sessionId": self.sid, "version": "2.1.9", "gitBranch": BRANCH,
            "type": kind, "message": message, "uuid": uid, "timestamp": self._time(seconds),
            **extra,
        })
        self.parent = uid

    def snapshot(self) -> None:
        self.lines.append({"type": "file-history-snapshot", "messageId": str(uuid.uuid5(NS, self.name)),
                           "snapshot": {"trackedFileBackups": {}, "timestamp": self._time(0)},
                           "isSnapshotUpdate": False})

    def user(self, text: str, seconds: float = 60) -> None:
        self.turn += 1
        self._line("user", {"role": "user", "content": text}, seconds)

    def _assistant(self, block: dict, seconds: float) -> None:
        message = {"id": f"msg_01{self.name[:6]}{self.turn:03d}", "type": "message",
                   "role": "assistant", "model": MODEL, "content": [block],
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 4, "cache_read_input_tokens": 18400, "output_tokens": 310}}
        self._line("assistant", message, seconds, requestId=f"req_011{self.name[:6]}{self.turn:03d}")

    def think(self, text: str, seconds: float = 6) -> None:
        self._assistant({"type": "thinking", "thinking": text, "signature": "EuYBCkQIBxgCIkD"}, seconds)

    def say(self, text: str, seconds: float = 8) -> None:
        self._assistant({"type": "text", "text": text}, seconds)

    def tool(self, name: str, args: dict, result: str, *, error: bool = False,
             seconds: float = 4, runtime: float = 3) -> None:
        self.tools += 1
        tid = f"toolu_01{self.name[:6].upper()}{self.tools:04d}"
        self._assistant({"type": "tool_use", "id": tid, "name": name, "input": args}, seconds)
        block = {"tool_use_id": tid, "type": "tool_result", "content": result}
        if error:
            block["is_error"] = True
        extra = {"toolUseResult": {"stdout": result, "stderr": "", "interrupted": False,
                                   "isImage": False}} if name == "Bash" else {}
        self._line("user", {"role": "user", "content": [block]}, runtime, **extra)

    def summary(self, text: str) -> None:
        self.lines.insert(0, {"type": "summary", "summary": text, "leafUuid": self.parent})

    def write(self) -> Path:
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{self.sid}.jsonl"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in self.lines))
        return path


def jwt_session() -> Session:
    s = Session("jwt-auth", "2026-03-02T09:14:03")
    s.snapshot()
    s.user("We need JWT auth on acme-api: a login endpoint that returns an access token, and "
           "/orders should only answer authenticated users. Use the existing users table.", 0)
    s.think("Look at the layout first: FastAPI app, routers, settings. The signing secret must "
            "come from the environment, not from code. Check what is installed before adding a "
            "JWT library.")
    s.tool("Bash", {"command": "git status --short && ls app app/routers",
                    "description": "Show the working tree and app layout"},
           "app:\n__init__.py\ndb.py\nmain.py\nmodels.py\nrouters\nsettings.py\n\napp/routers:\n"
           "__init__.py\nhealth.py\norders.py")
    s.tool("Read", {"file_path": f"{CWD}/requirements.txt"},
           "     1\tfastapi==0.115.6\n     2\tuvicorn[standard]==0.34.0\n     3\tsqlalchemy==2.0.36\n"
           "     4\tasyncpg==0.30.0\n     5\talembic==1.14.0\n     6\tpydantic-settings==2.7.0\n"
           "     7\tbcrypt==4.2.1")
    s.tool("Grep", {"pattern": "password_hash", "path": "app", "output_mode": "content", "-n": True},
           "app/models.py:18:    password_hash: Mapped[str] = mapped_column(String(60))")
    s.think("No JWT library yet. PyJWT is small and maintained (python-jose is not). Passwords "
            "are already bcrypt hashes (String(60)), so bcrypt.checkpw is enough; no passlib. "
            "HS256 with a secret from JWT_SECRET, 30 minute tokens.")
    s.say("Plan:\n1. add PyJWT;\n2. `app/auth.py`: create and verify tokens, a `get_current_user` "
          "dependency;\n3. `POST /auth/token` (OAuth2 password form);\n4. protect `/orders`;\n"
          "5. settings `jwt_secret`, `jwt_algorithm`, `access_token_minutes`.")
    s.tool("Bash", {"command": "uv add pyjwt==2.10.1", "description": "Add PyJWT"},
           "Resolved 31 packages in 412ms\nInstalled 1 package in 9ms\n + pyjwt==2.10.1", runtime=5)
    s.tool("Edit", {"file_path": f"{CWD}/app/settings.py",
                    "old_string": "    database_url: str\n",
                    "new_string": "    database_url: str\n    jwt_secret: SecretStr\n"
                                  "    jwt_algorithm: str = \"HS256\"\n"
                                  "    access_token_minutes: int = 30\n"},
           f"The file {CWD}/app/settings.py has been updated.")
    s.tool("Write", {"file_path": f"{CWD}/app/auth.py", "content": '''"""Access tokens: JWT signed with HS256, and the dependency that checks them."""

from datetime import UTC, datetime, timedelta

import jwt
from fastapi import Depends, HTTPException, status
from fastapi.security import OAuth2PasswordBearer
from sqlalchemy.ext.asyncio import AsyncSession

from .db import get_session
from .models import User
from .settings import settings

oauth2_scheme = OAuth2PasswordBearer(tokenUrl="/auth/token")


def create_access_token(user_id: int, expires_delta: timedelta | None = None) -> str:
    expire = datetime.now(UTC) + (expires_delta or timedelta(minutes=settings.access_token_minutes))
    payload = {"sub": str(user_id), "exp": expire}
    return jwt.encode(payload, settings.jwt_secret.get_secret_value(), settings.jwt_algorithm)


async def get_current_user(token: str = Depends(oauth2_scheme),
                           db: AsyncSession = Depends(get_session)) -> User:
    unauthorized = HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or expired token",
                                 headers={"WWW-Authenticate": "Bearer"})
    try:
        payload = jwt.decode(token, settings.jwt_secret.get_secret_value(),
                             algorithms=[settings.jwt_algorithm])
    except jwt.PyJWTError:
        raise unauthorized from None
    user = await db.get(User, int(payload["sub"]))
    if user is None:
        raise unauthorized
    return user
'''}, f"File created successfully at: {CWD}/app/auth.py")
    s.tool("Edit", {"file_path": f"{CWD}/app/routers/orders.py",
                    "old_string": "async def list_orders(db: AsyncSession = Depends(get_session)):",
                    "new_string": "async def list_orders(db: AsyncSession = Depends(get_session),\n"
                                  "                      user: User = Depends(get_current_user)):"},
           f"The file {CWD}/app/routers/orders.py has been updated.")
    s.tool("Bash", {"command": "pytest -q", "description": "Run the test suite"},
           "==================================== ERRORS ====================================\n"
           "_______________________ ERROR collecting tests/test_orders.py _______________________\n"
           "app/settings.py:21: in <module>\n    settings = Settings()\n"
           "E   pydantic_core._pydantic_core.ValidationError: 1 validation error for Settings\n"
           "E   jwt_secret\nE     Field required [type=missing, input_value={...}, input_type=dict]\n"
           "=========================== short test summary info ============================\n"
           "ERROR tests/test_orders.py - pydantic_core._pydantic_core.ValidationError\n"
           "1 error in 0.62s", error=True, runtime=4)
    s.think("Settings now require JWT_SECRET and the test run has no environment for it. Set a "
            "fixed test secret in tests/conftest.py before the app is imported; never a default "
            "in Settings itself, or production could start with it.")
    s.tool("Edit", {"file_path": f"{CWD}/tests/conftest.py",
                    "old_string": "import pytest\n",
                    "new_string": "import os\n\nimport pytest\n\n"
                                  "os.environ.setdefault(\"JWT_SECRET\", \"test-secret-not-for-production\")\n"},
           f"The file {CWD}/tests/conftest.py has been updated.")
    s.tool("Write", {"file_path": f"{CWD}/tests/test_auth.py", "content": '''from datetime import timedelta

from app.auth import create_access_token


async def test_token_grants_access(client, user):
    token = create_access_token(user.id)
    resp = await client.get("/orders", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200


async def test_missing_token_rejected(client):
    assert (await client.get("/orders")).status_code == 401


async def test_expired_token_rejected(client, user):
    import time
    token = create_access_token(user.id, expires_delta=timedelta(seconds=1))
    time.sleep(1)
    resp = await client.get("/orders", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 401
'''}, f"File created successfully at: {CWD}/tests/test_auth.py")
    s.tool("Bash", {"command": "pytest -q", "description": "Run the test suite"},
           "..................                                                       [100%]\n"
           "18 passed in 2.41s", runtime=5)
    s.say("JWT authentication is in place:\n\n"
          "- `POST /auth/token` takes the OAuth2 password form and returns "
          "`{\"access_token\": ..., \"token_type\": \"bearer\"}`;\n"
          "- `/orders` requires `Authorization: Bearer <token>`;\n"
          "- tokens are HS256, signed with `JWT_SECRET` (environment), valid 30 minutes "
          "(`ACCESS_TOKEN_MINUTES`).\n\nTry it:\n\n```bash\n"
          "TOKEN=$(curl -s -X POST localhost:8000/auth/token -d 'username=ann&password=s3cret' "
          "| jq -r .access_token)\ncurl -H \"Authorization: Bearer $TOKEN\" localhost:8000/orders\n```")
    s.user("Great, commit it.", 95)
    s.tool("Bash", {"command": "git add -A && git commit -m \"Add JWT authentication (PyJWT, HS256)\"",
                    "description": "Commit the auth work"},
           "[feature/auth 3f9c2a1] Add JWT authentication (PyJWT, HS256)\n"
           " 7 files changed, 142 insertions(+), 3 deletions(-)\n create mode 100644 app/auth.py\n"
           " create mode 100644 app/routers/auth.py\n create mode 100644 tests/test_auth.py")
    s.say("Committed as `3f9c2a1` on `feature/auth`.")
    s.summary("JWT authentication for acme-api (PyJWT, HS256, /auth/token)")
    return s


def docker_session() -> Session:
    s = Session("docker-deploy", "2026-03-05T14:02:40")
    s.snapshot()
    s.user("Deploy acme-api to the staging box with docker compose. The Dockerfile comes from "
           "our template repo; the load balancer health-checks port 8080.", 0)
    s.tool("Read", {"file_path": f"{CWD}/Dockerfile"},
           "     1\tFROM python:3.12-alpine\n     2\tWORKDIR /app\n     3\tCOPY requirements.txt .\n"
           "     4\tRUN pip install --no-cache-dir -r requirements.txt\n     5\tCOPY . .\n"
           "     6\tCMD [\"uvicorn\", \"app.main:app\", \"--host\", \"0.0.0.0\", \"--port\", \"8000\"]")
    s.tool("Read", {"file_path": f"{CWD}/docker-compose.yml"},
           "     1\tservices:\n     2\t  api:\n     3\t    build: .\n     4\t    env_file: .env.staging\n"
           "     5\t    ports:\n     6\t      - \"8080:8080\"\n     7\t    depends_on: [db]")
    s.tool("Bash", {"command": "docker compose build api", "description": "Build the API image",
                    "timeout": 600000},
           "#8 [4/5] RUN pip install --no-cache-dir -r requirements.txt\n"
           "#8 12.40 Building wheel for asyncpg (pyproject.toml): started\n"
           "#8 14.02   error: command 'gcc' failed: No such file or directory\n"
           "#8 14.03   ERROR: Failed building wheel for asyncpg\n"
           "#8 14.91 ERROR: Could not build wheels for asyncpg, which is required to install "
           "pyproject.toml-based projects\n"
           "failed to solve: process \"/bin/sh -c pip install --no-cache-dir -r requirements.txt\" "
           "did not complete successfully: exit code: 1", error=True, runtime=48)
    s.think("Alpine is musl-based: pip finds no prebuilt wheel for asyncpg here and tries to "
            "compile it, and the image has no gcc. Two ways out: add build-base and musl-dev "
            "(bigger image, slow builds, and bcrypt or cryptography will want Rust next), or "
            "switch to python:3.12-slim (glibc, manylinux wheels install as they are). Slim is "
            "the robust fix.")
    s.say("The build fails because `python:3.12-alpine` uses musl libc: asyncpg has no wheel "
          "for it, pip tries to compile it and there is no `gcc`. I'll switch the base image to "
          "`python:3.12-slim`, where the manylinux wheels install directly.")
    s.tool("Edit", {"file_path": f"{CWD}/Dockerfile", "old_string": "FROM python:3.12-alpine",
                    "new_string": "FROM python:3.12-slim"},
           f"The file {CWD}/Dockerfile has been updated.")
    s.tool("Bash", {"command": "docker compose build api", "description": "Build the API image"},
           "#8 [4/5] RUN pip install --no-cache-dir -r requirements.txt\n"
           "#8 9.87 Successfully installed alembic-1.14.0 asyncpg-0.30.0 bcrypt-4.2.1 fastapi-0.115.6 "
           "pyjwt-2.10.1 ...\n#10 naming to docker.io/library/acme-api-api done\n Service api  Built",
           runtime=35)
    s.tool("Bash", {"command": "docker compose up -d && sleep 3 && curl -fsS http://localhost:8080/health",
                    "description": "Start the stack and check health"},
           " Container acme-api-db-1  Running\n Container acme-api-api-1  Started\n"
           "curl: (56) Recv failure: Connection reset by peer", error=True, runtime=9)
    s.tool("Bash", {"command": "docker compose logs api --tail 5", "description": "Read the API logs"},
           "api-1  | INFO:     Started server process [1]\napi-1  | INFO:     Waiting for application startup.\n"
           "api-1  | INFO:     Application startup complete.\n"
           "api-1  | INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
    s.think("Uvicorn listens on 8000 inside the container, compose publishes 8080:8080 and the "
            "load balancer checks 8080. The container port is the one to change: run uvicorn on "
            "8080 and EXPOSE it, so that image, compose and load balancer agree.")
    s.tool("Write", {"file_path": f"{CWD}/Dockerfile", "content": '''FROM python:3.12-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
EXPOSE 8080
CMD ["uvicorn", "app.main:app", "--host", "0.0.0.0", "--port", "8080"]
'''}, f"The file {CWD}/Dockerfile has been updated.")
    s.tool("Bash", {"command": "docker compose up -d --build && sleep 3 && curl -fsS http://localhost:8080/health",
                    "description": "Rebuild, restart and check health"},
           " Service api  Built\n Container acme-api-api-1  Recreated\n Container acme-api-api-1  Started\n"
           "{\"status\":\"ok\",\"db\":\"ok\"}", runtime=41)
    s.say("Staging is up: `curl localhost:8080/health` answers `{\"status\":\"ok\",\"db\":\"ok\"}`.\n\n"
          "Two fixes in the Dockerfile:\n1. base image `python:3.12-slim` instead of alpine (asyncpg "
          "could not be built on musl without a compiler);\n2. uvicorn on port 8080, the port "
          "compose publishes and the load balancer checks (it was 8000).\n\n```dockerfile\n"
          "FROM python:3.12-slim\n...\nEXPOSE 8080\n"
          "CMD [\"uvicorn\", \"app.main:app\", \"--host\", \"0.0.0.0\", \"--port\", \"8080\"]\n```")
    s.user("Why did alpine fail exactly? I want us to remember this for the other services.", 130)
    s.say("Alpine images use musl instead of glibc. Most packages with C extensions (asyncpg, "
          "bcrypt, cryptography, psycopg binary builds, numpy) publish manylinux (glibc) wheels; on "
          "musl pip must build from source, which needs gcc, musl-dev and sometimes Rust, none of "
          "which the image has. Rule for our services: use `python:3.12-slim` as base image; only "
          "use alpine for pure-Python images, and then pin musllinux wheels.")
    s.summary("Docker deploy to staging: alpine build failure fixed with python:3.12-slim, port 8080")
    return s


def flaky_session() -> Session:
    s = Session("flaky-test", "2026-03-10T10:31:12")
    s.snapshot()
    s.user("CI is red on feature/auth every few runs: tests/test_auth.py::test_expired_token_rejected. "
           "It passes locally. Can you look?", 0)
    s.tool("Bash", {"command": "pytest tests/test_auth.py::test_expired_token_rejected --count 50 -q -x",
                    "description": "Repeat the suspect test 50 times"},
           "..........F\n=================================== FAILURES ===================================\n"
           "___________________ test_expired_token_rejected[11-50] ___________________\n"
           ">       assert resp.status_code == 401\nE       assert 200 == 401\n"
           "tests/test_auth.py:19: AssertionError\n1 failed, 10 passed in 11.73s",
           error=True, runtime=14)
    s.tool("Read", {"file_path": f"{CWD}/tests/test_auth.py", "offset": 14, "limit": 6},
           "    14\tasync def test_expired_token_rejected(client, user):\n    15\t    import time\n"
           "    16\t    token = create_access_token(user.id, expires_delta=timedelta(seconds=1))\n"
           "    17\t    time.sleep(1)\n"
           "    18\t    resp = await client.get(\"/orders\", headers={\"Authorization\": f\"Bearer {token}\"})\n"
           "    19\t    assert resp.status_code == 401")
    s.think("JWT `exp` is a whole number of seconds: PyJWT encodes the datetime with timegm, which "
            "drops the fraction. A token made at 100.9 s with a 1 s lifetime gets exp=101; after "
            "sleep(1) it is 101.9, and PyJWT only rejects when now > exp + leeway, comparing against "
            "int(now)=101 — not expired yet. The test races the clock. Do not sleep at all: make a "
            "token that expired minutes ago.")
    s.say("The test races the wall clock: `exp` is stored in whole seconds, so a 1-second token "
          "checked after `sleep(1)` is sometimes still valid. A token that expired in the past "
          "removes the race (and the sleep):\n\n```python\n"
          "async def test_expired_token_rejected(client, user):\n"
          "    token = create_access_token(user.id, expires_delta=timedelta(minutes=-5))\n"
          "    resp = await client.get(\"/orders\", headers={\"Authorization\": f\"Bearer {token}\"})\n"
          "    assert resp.status_code == 401\n```")
    s.tool("Edit", {"file_path": f"{CWD}/tests/test_auth.py",
                    "old_string": "    import time\n    token = create_access_token(user.id, "
                                  "expires_delta=timedelta(seconds=1))\n    time.sleep(1)\n",
                    "new_string": "    token = create_access_token(user.id, "
                                  "expires_delta=timedelta(minutes=-5))\n"},
           f"The file {CWD}/tests/test_auth.py has been updated.")
    s.tool("Bash", {"command": "pytest tests/test_auth.py::test_expired_token_rejected --count 200 -q",
                    "description": "Repeat the test 200 times"},
           "........................................................................ [ 36%]\n"
           "........................................................................ [ 72%]\n"
           "........................................................                 [100%]\n"
           "200 passed in 3.02s", runtime=6)
    s.tool("Grep", {"pattern": "time\\.sleep", "path": "tests", "output_mode": "content", "-n": True},
           "tests/test_orders.py:88:    time.sleep(1.1)  # let the rate-limit window pass")
    s.say("Fixed: 200 runs in a row pass. There is one more `time.sleep` in `tests/test_orders.py:88` "
          "(rate-limit window) with the same kind of risk.")
    s.user("Fix that one too then.", 75)
    s.think("The rate limiter reads time.monotonic() directly. Inject the clock: RateLimiter takes "
            "a `clock` callable, the test passes a fake it can advance. No sleeping, no new "
            "dependency (freezegun does not patch monotonic reliably anyway).")
    s.tool("Edit", {"file_path": f"{CWD}/app/ratelimit.py",
                    "old_string": "    def __init__(self, limit: int, window: float):\n",
                    "new_string": "    def __init__(self, limit: int, window: float, clock=time.monotonic):\n"
                                  "        self.clock = clock\n"},
           f"The file {CWD}/app/ratelimit.py has been updated.")
    s.tool("Edit", {"file_path": f"{CWD}/tests/test_orders.py",
                    "old_string": "    time.sleep(1.1)  # let the rate-limit window pass\n",
                    "new_string": "    fake_clock.advance(1.1)  # let the rate-limit window pass\n"},
           f"The file {CWD}/tests/test_orders.py has been updated.")
    s.tool("Bash", {"command": "pytest -q -p randomly", "description": "Full suite, random order"},
           "...........................                                              [100%]\n"
           "27 passed in 1.88s", runtime=4)
    s.say("Done: the rate limiter takes an injectable `clock`, the test advances a fake clock "
          "instead of sleeping. The whole suite passes in random order, in 1.9 s instead of 4.")
    s.summary("Flaky test_expired_token_rejected: wall-clock race, fixed with an already-expired token")
    return s


def migration_session() -> Session:
    s = Session("refresh-migration", "2026-03-16T16:05:27")
    s.snapshot()
    s.user("Add refresh tokens: a refresh_tokens table (user_id, token_hash, expires_at, revoked_at) "
           "with an Alembic migration and POST /auth/refresh. Also record users.last_login_at, "
           "it must never be null.", 0)
    s.tool("Bash", {"command": "alembic current && alembic heads", "description": "Show migration state"},
           "a1b2c3d4e5f6 (head)\na1b2c3d4e5f6 (head)")
    s.tool("Edit", {"file_path": f"{CWD}/app/models.py",
                    "old_string": "    password_hash: Mapped[str] = mapped_column(String(60))\n",
                    "new_string": "    password_hash: Mapped[str] = mapped_column(String(60))\n"
                                  "    last_login_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))\n"},
           f"The file {CWD}/app/models.py has been updated.")
    s.tool("Edit", {"file_path": f"{CWD}/app/models.py", "old_string": "class Order(Base):",
                    "new_string": '''class RefreshToken(Base):
    __tablename__ = "refresh_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Order(Base):'''},
           f"The file {CWD}/app/models.py has been updated.")
    s.tool("Bash", {"command": "alembic revision --autogenerate -m \"refresh tokens and last login\"",
                    "description": "Generate the migration"},
           "INFO  [alembic.autogenerate.compare] Detected added table 'refresh_tokens'\n"
           "INFO  [alembic.autogenerate.compare] Detected added column 'users.last_login_at'\n"
           f"  Generating {CWD}/migrations/versions/7c41e2d9b0aa_refresh_tokens_and_last_login.py ...  done")
    s.tool("Bash", {"command": "alembic upgrade head", "description": "Apply the migration"},
           "INFO  [alembic.runtime.migration] Running upgrade a1b2c3d4e5f6 -> 7c41e2d9b0aa, "
           "refresh tokens and last login\n"
           "sqlalchemy.exc.IntegrityError: (psycopg.errors.NotNullViolation) column \"last_login_at\" "
           "of relation \"users\" contains null values\n"
           "[SQL: ALTER TABLE users ADD COLUMN last_login_at TIMESTAMP WITH TIME ZONE NOT NULL]",
           error=True, runtime=3)
    s.think("Adding a NOT NULL column without a default fails as soon as the table has rows. The "
            "migration has to go in three steps: add the column nullable, backfill it (created_at "
            "is the best guess for users who never logged in since), then set NOT NULL. The "
            "transaction was rolled back, so the database is still at a1b2c3d4e5f6.")
    s.tool("Edit", {"file_path": f"{CWD}/migrations/versions/7c41e2d9b0aa_refresh_tokens_and_last_login.py",
                    "old_string": "    op.add_column(\"users\", sa.Column(\"last_login_at\", "
                                  "sa.DateTime(timezone=True), nullable=False))\n",
                    "new_string": '''    # Existing rows get a value before the column becomes NOT NULL.
    op.add_column("users", sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE users SET last_login_at = created_at")
    op.alter_column("users", "last_login_at", nullable=False)
'''},
           f"The file {CWD}/migrations/versions/7c41e2d9b0aa_refresh_tokens_and_last_login.py has been updated.")
    s.tool("Bash", {"command": "alembic upgrade head && alembic downgrade -1 && alembic upgrade head",
                    "description": "Apply, roll back and re-apply the migration"},
           "INFO  [alembic.runtime.migration] Running upgrade a1b2c3d4e5f6 -> 7c41e2d9b0aa, refresh tokens and last login\n"
           "INFO  [alembic.runtime.migration] Running downgrade 7c41e2d9b0aa -> a1b2c3d4e5f6, refresh tokens and last login\n"
           "INFO  [alembic.runtime.migration] Running upgrade a1b2c3d4e5f6 -> 7c41e2d9b0aa, refresh tokens and last login",
           runtime=4)
    s.tool("Edit", {"file_path": f"{CWD}/app/routers/auth.py", "old_string": "# refresh: TODO\n",
                    "new_string": '''@router.post("/refresh")
async def refresh(body: RefreshIn, db: AsyncSession = Depends(get_session)) -> TokenPair:
    old = await db.scalar(select(RefreshToken).where(
        RefreshToken.token_hash == sha256(body.refresh_token.encode()).hexdigest(),
        RefreshToken.revoked_at.is_(None), RefreshToken.expires_at > func.now()))
    if old is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid refresh token")
    old.revoked_at = datetime.now(UTC)  # rotation: a refresh token works once
    return await issue_token_pair(db, old.user_id)
'''},
           f"The file {CWD}/app/routers/auth.py has been updated.")
    s.tool("Bash", {"command": "pytest -q", "description": "Run the test suite"},
           "...............................                                          [100%]\n"
           "31 passed in 2.57s", runtime=5)
    s.say("Migration `7c41e2d9b0aa` is applied (and tested both ways). The first attempt failed: "
          "`users` has rows, so adding `last_login_at` as NOT NULL at once is refused. The "
          "migration now adds it nullable, backfills it, then sets NOT NULL:\n\n```python\n"
          "op.add_column(\"users\", sa.Column(\"last_login_at\", sa.DateTime(timezone=True), nullable=True))\n"
          "op.execute(\"UPDATE users SET last_login_at = created_at\")\n"
          "op.alter_column(\"users\", \"last_login_at\", nullable=False)\n```\n\n"
          "`refresh_tokens` stores a SHA-256 of each token (never the token), with `expires_at` and "
          "`revoked_at`; `POST /auth/refresh` rotates: it revokes the old token and issues a new pair.")
    s.summary("Refresh tokens table and users.last_login_at migration (backfill before NOT NULL)")
    return s


if __name__ == "__main__":
    for make in (jwt_session, docker_session, flaky_session, migration_session):
        print(make().write())
