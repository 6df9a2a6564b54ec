"""Starts `deepinfer serve` (or the fake-engine server) on a free loopback port.

Two kinds of server, selected by the `server` fixture's parameter:
  fake: deepinfer_test_serve --engine fake (tests/server/test_serve; scripted engine)
  real: `deepinfer serve --model tests/fixtures/v41_tiny_f32`; while `serve` is not
        wired into main.cpp, `deepinfer_test_serve --engine real` (the same server
        code over Engine::create). Skipped only when neither binary is built.
Binaries come from $DEEPINFER_TEST_SERVE / $DEEPINFER_BINARY (set by ctest) or
the newest build*/ directory.
"""
import glob
import json
import os
import pathlib
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(os.environ.get("DEEPINFER_FIXTURES", ROOT / "tests" / "fixtures"))
MODEL_DIR = FIXTURES / "v41_tiny_f32"
API_KEY = "test-key"


def _find(env_name, pattern):
    path = os.environ.get(env_name)
    if path:
        return path if os.path.exists(path) else None
    found = sorted(glob.glob(str(ROOT / pattern)), key=os.path.getmtime)
    return found[-1] if found else None


def test_serve_binary():
    return _find("DEEPINFER_TEST_SERVE", "build*/tests/deepinfer_test_serve")


def real_binary():
    return _find("DEEPINFER_BINARY", "build*/deepinfer")


def http(method, url, body=None, headers=None, timeout=30):
    """(status, headers, body bytes) of one request; never raises for HTTP errors."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class ServerProcess:
    def __init__(self, argv, startup_timeout=120):
        self.argv = argv + ["--host", "127.0.0.1", "--port", "0"]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        self._port_seen = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._port_seen.wait(startup_timeout) or self.port is None:
            self.kill()
            raise RuntimeError("server did not start: " + " ".join(self.argv) + "\n" + "".join(self.log))

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)
            if self.port is None and "listening on http://" in line:
                self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
                self._port_seen.set()
        self._port_seen.set()

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_healthy(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + "".join(self.log))
            try:
                if http("GET", self.url("/health"), timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server never became healthy:\n" + "".join(self.log))

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def serve_argv(kind):
    """The command line of a server of this kind, or pytest.skip."""
    test_serve = test_serve_binary()
    if kind == "fake":
        if not test_serve:
            pytest.skip("deepinfer_test_serve is not built")
        return [test_serve, "--engine", "fake", "--served-model-name", "test-model"]
    flags = ["--model", str(MODEL_DIR), "--served-model-name", "test-model"]
    binary = real_binary()
    if binary:
        probe = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=30)
        if "usage: deepinfer serve" in probe.stdout + probe.stderr:
            return [binary, "serve"] + flags
    if not test_serve:
        pytest.skip("neither `deepinfer serve` nor deepinfer_test_serve is built")
    return [test_serve, "--engine", "real"] + flags


def start_server(kind, *extra):
    server = ServerProcess(serve_argv(kind) + list(extra))
    server.kind = kind
    try:
        server.wait_healthy()
    except Exception:
        server.kill()
        raise
    return server


@pytest.fixture(scope="module", params=["fake", "real"])
def server(request):
    s = start_server(request.param, "--api-key", API_KEY)
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import openai

    return openai.OpenAI(base_url=server.url("/v1"), api_key=API_KEY, max_retries=0, timeout=60)
