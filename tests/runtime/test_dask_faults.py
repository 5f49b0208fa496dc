"""Nothing on the Dask path hangs: an address where no Dask scheduler answers is refused within seconds
with one line naming it, workers that die as they start end the run with a message, and a local cluster
is not larger than the machine's cores unless asked for.

The servers are real sockets started by the test (an HTTP server, a listener that never speaks, one that
sends another protocol's bytes); the dying workers are real worker processes of a LocalCluster.
"""
from __future__ import annotations

import http.server
import os
import socket
import threading
import time

import pytest
from click.testing import CliRunner

pytest.importorskip("distributed")

import tabsim as ts  # noqa: E402
from tabsim.base.host import cpu_count  # noqa: E402
from tabsim.cli import main  # noqa: E402
from tabsim.runtime import health  # noqa: E402
from tabsim.runtime.dask import DaskExecutor, probe_scheduler  # noqa: E402
from tabsim.runtime.executors import ExecutorError  # noqa: E402

TINY = 'preset = "paper"\n[task]\nn_prompts = 8\n[train]\nsteps = 2\nseeds = 2\nbatch_size = 4\n'


def _serve(handler) -> tuple[int, threading.Event]:
    """A listening socket on 127.0.0.1 whose connections ``handler(conn)`` serves in threads; its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def loop():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            threading.Thread(target=handler, args=(conn,), daemon=True).start()
        srv.close()

    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1], stop


def _silent(conn):
    time.sleep(60)  # accepts and never speaks
    conn.close()


def _garbage(conn):
    try:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n" + os.urandom(4096))  # another service's greeting
        time.sleep(2)
    finally:
        conn.close()


def _short_frame(conn):
    try:  # a plausible length, then bytes that are not a Dask handshake
        conn.sendall((40).to_bytes(8, "little") + b"x" * 40)
        time.sleep(2)
    finally:
        conn.close()


def _closes(conn):
    conn.close()


@pytest.fixture
def http_port():
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("kind, words", [
    ("http", ["no Dask greeting"]),
    ("silent", ["no Dask greeting"]),
    ("garbage", ["not Dask's protocol"]),
    ("short-frame", ["not Dask's protocol"]),
    ("closes", ["closed without a Dask greeting"]),
    ("nothing", ["cannot connect"]),
])
def test_an_address_without_a_scheduler_is_refused_within_seconds(kind, words, http_port, tmp_path, monkeypatch):
    # a listener that never greets is refused when the probe's time is up: 1 s here instead of the
    # default PROBE_SECONDS (the suite would otherwise wait 2 x 5 s doing nothing)
    monkeypatch.setattr(health, "PROBE_SECONDS", 1.0)
    stops = []
    if kind == "http":
        port = http_port
    elif kind == "nothing":
        port = _free_port()
    else:
        port, stop = _serve({"silent": _silent, "garbage": _garbage, "short-frame": _short_frame,
                             "closes": _closes}[kind])
        stops.append(stop)
    (tmp_path / "tiny.toml").write_text(TINY)
    address = f"tcp://127.0.0.1:{port}"
    box = {}

    def invoke():  # in a thread: a regression that hangs fails the test at 30 s instead of hanging the suite
        box["res"] = CliRunner().invoke(main, ["run", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "out"),
                                               "-q", "--executor", "dask", "--scheduler", address])

    t0 = time.perf_counter()
    worker = threading.Thread(target=invoke, daemon=True)
    worker.start()
    worker.join(30)
    seconds = time.perf_counter() - t0
    assert not worker.is_alive(), f"{kind}: still waiting after 30 s"
    res = box["res"]
    for s in stops:
        s.set()
    print(f"\n{kind}: refused in {seconds:.2f} s")
    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and address in lines[0], res.output
    for w in words:
        assert w in res.output, (w, res.output)
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.staging").exists()


def test_the_probe_accepts_a_real_scheduler():
    with DaskExecutor(workers=1, announce=False, dashboard=False, compile_cache=False) as ex:
        probe_scheduler(ex.address)


def test_a_local_cluster_is_capped_at_the_cores(tmp_path, monkeypatch, capsys):
    ex = DaskExecutor(workers=1000, announce=True)
    assert ex.workers == cpu_count() and ex.client is None  # nothing started
    assert "capped at" in capsys.readouterr().err
    assert DaskExecutor(workers=1000, oversubscribe=True, announce=False).workers == 1000

    from tabsim.runtime import run as api

    seen = {}

    def stand_in(cfg, executor=None, **kw):
        seen["workers"] = executor.workers
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run", stand_in)
    (tmp_path / "tiny.toml").write_text(TINY)
    base = ["run", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "out"), "-q", "--executor", "dask"]
    CliRunner().invoke(main, base + ["--workers", "1000"])
    assert seen["workers"] == cpu_count()
    many = 3 * cpu_count()  # over the cores, under the bound of --oversubscribe (4 per core)
    CliRunner().invoke(main, base + ["--workers", str(many), "--oversubscribe", "--overwrite"])
    assert seen["workers"] == many
    res = CliRunner().invoke(main, base + ["--oversubscribe"])
    assert res.exit_code == 2 and "--oversubscribe" in res.output


class _DieOnStart:
    """A worker plugin that ends its worker's process as it is set up (every restarted worker too)."""

    name = "tabsim-test-die"
    idempotent = False

    def setup(self, worker=None):
        os._exit(3)

    def teardown(self, worker=None):
        pass


@pytest.mark.heavy  # about 20 s: the nannies restart the workers six times before the run gives up
def test_workers_that_die_as_they_start_end_the_run_with_a_message(tmp_path):
    from distributed.diagnostics.plugin import WorkerPlugin

    class Die(_DieOnStart, WorkerPlugin):
        pass

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 8}, "train": {"steps": 2, "seeds": 2, "batch_size": 4}})
    with DaskExecutor(workers=2, announce=False, dashboard=False, compile_cache=tmp_path) as ex:
        try:
            ex.client.register_plugin(Die(), name=Die.name)
        except Exception:  # noqa: BLE001  (the workers died while it was being registered)
            pass
        box = {}

        def run():  # in a thread: a regression that waits for ever fails the test at 90 s
            try:
                ts.run(cfg, executor=ex, progress=False)
            except Exception as err:  # noqa: BLE001
                box["err"] = err

        t0 = time.perf_counter()
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(90)
        seconds = time.perf_counter() - t0
        assert not worker.is_alive(), "still waiting for workers after 90 s"
    err = box.get("err")
    print(f"\ngave up after {seconds:.1f} s: {err}")
    assert isinstance(err, ExecutorError) and "died" in str(err) and "\n" not in str(err)
