"""Real kvferryd processes for the Python tests and examples: a private temp dir with a config,
the daemon's log, start (waits until its worker socket accepts), stop, restart. Two daemons get
a shared cluster secret; the first listens on a free port (its "host:port" is the home)."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/python/..
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, top, name, listen_port=None, secret=None, extra=""):
        self.dir = os.path.join(top, name)
        os.makedirs(self.dir, exist_ok=True)
        self.cfg = os.path.join(self.dir, "kvferry.yaml")
        self.log = os.path.join(self.dir, "log")
        self.sock = os.path.join(self.dir, "worker.sock")
        self.port = listen_port
        text = 'sockets:\n  dir: "%s"\n' % self.dir
        if secret:
            text += ('listen:\n  address: "127.0.0.1"\n  port: %d\ncluster:\n  secret_file: "%s"\n'
                     'arena:\n  size: 64MiB\n  chunk: 4MiB\n' % (listen_port or 0, secret))
        with open(self.cfg, "w") as f:
            f.write(text + extra)
        self.proc = None

    @property
    def home(self):
        return "127.0.0.1:%d" % self.port

    def start(self, timeout=20.0):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([os.path.join(BUILD, "kvferryd"), "--config", self.cfg],
                                     stdout=logf, stderr=logf)
        logf.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("kvferryd exited %d:\n%s" % (self.proc.returncode, self.tail()))
            if os.path.exists(self.sock):
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(self.sock)
                    return self
                except OSError:
                    pass
                finally:
                    s.close()
            time.sleep(0.02)  # polling a socket that appears, bounded by timeout
        raise RuntimeError("kvferryd did not open %s in %.0f s:\n%s" % (self.sock, timeout,
                                                                       self.tail()))

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else 0
        self.proc = None
        return rc

    def tail(self, n=40):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class Cluster:
    """One daemon (two=False) or two (a: the context instance's home, b: the generation's)."""

    def __init__(self, two=False):
        self.top = tempfile.mkdtemp(prefix="kvf-py-")
        self.daemons = []
        if two:
            secret = os.path.join(self.top, "secret")
            with open(secret, "w") as f:
                f.write(secrets.token_hex(24))
            os.chmod(secret, 0o600)
            self.a = Daemon(self.top, "a", free_port(), secret)
            self.b = Daemon(self.top, "b", 0, secret)
            self.daemons = [self.a, self.b]
        else:
            self.a = self.b = Daemon(self.top, "a")
            self.daemons = [self.a]

    def __enter__(self):
        for d in self.daemons:
            d.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for d in self.daemons:
            d.stop()
        shutil.rmtree(self.top, ignore_errors=True)
