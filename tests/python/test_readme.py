"""README facts that drifted once, checked against the code so they cannot again: the ABI
number, the Python Client's signatures (every public method listed, each spelled as
inspect.signature spells it), what wait() returns (one key: its Event; several: {key: Event},
also checked on a real daemon), and every `section.key` the README names is a key of
config/kvferry.yaml (itself checked against the daemon's key table by check_cfg)."""
import inspect
import os
import re
import unittest

import kvftest
import kvferry
from kvferry import _lib

README = open(os.path.join(kvftest.ROOT, "README.md")).read()
HEADER = open(os.path.join(kvftest.ROOT, "lib", "kvferry.h")).read()

# Dotted names in backticks that are not config keys: status and stats paths, and a key the
# README says is gone.
NOT_CONFIG = {"control.metrics_http", "peers.paths", "peers.chunk_gpu_to_peer",
              "peers.gpu_gathers", "deadlines.validate"}


def client_bullet():
    start = README.index("- **`kvferry.Client(")
    end = README.index("\n- **", start + 1)
    return README[start:end]


class ReadmeFacts(unittest.TestCase):
    def test_abi_number(self):
        abi = int(re.search(r"#define KVF_ABI_VERSION (\d+)", HEADER).group(1))
        self.assertEqual(_lib.ABI_VERSION, abi)
        said = re.findall(r"`KVF_ABI_VERSION`\s*\(?(\d+)", README)
        self.assertGreaterEqual(len(said), 2)
        self.assertEqual(set(map(int, said)), {abi}, "README names ABI %s, kvferry.h %d"
                         % (said, abi))

    def test_client_signatures(self):
        text = " ".join(client_bullet().split())
        sig = lambda f: str(inspect.signature(f)).replace("(self, ", "(").replace("(self)", "()")  # noqa: E731
        self.assertIn("`kvferry.Client%s`" % sig(kvferry.Client.__init__), text)
        public = [n for n, v in vars(kvferry.Client).items() if not n.startswith("_")]
        self.assertIn("recv", public)
        for n in public:
            v = vars(kvferry.Client)[n]
            want = "`%s`" % n if isinstance(v, property) else "`%s%s`" % (n, sig(v))
            self.assertIn(want, text, "README's Client lacks %s" % want)

    def test_wait_returns_the_event_or_key_to_event(self):
        text = " ".join(client_bullet().split())
        self.assertIn("one key: returns its `Event`", text)
        self.assertIn("returns `{key: Event}`", text)

    def test_config_keys_exist(self):
        keys, sec = set(), None
        for line in open(os.path.join(kvftest.ROOT, "config", "kvferry.yaml")):
            m = re.match(r"^([a-z_]+):\s*$", line)
            if m:
                sec = m.group(1)
            m = re.match(r"^  ([a-z_]+):", line)
            if m and sec:
                keys.add(sec + "." + m.group(1))
        sections = {k.split(".")[0] for k in keys}
        named = set()
        for m in re.finditer(r"`([a-z_]+)\.([a-z_]+)(?::[^`]*)?`", README):
            if m.group(1) in sections and not m.group(2) in ("c", "h"):
                named.add(m.group(1) + "." + m.group(2))
        self.assertGreater(len(named), 30)
        self.assertEqual(sorted(named - keys - NOT_CONFIG), [],
                         "README names config keys kvferry.yaml lacks")


class ReadmeWait(kvftest.DaemonCase):
    def test_wait_on_a_real_daemon(self):
        import torch
        from kvferry import layout as kl
        raw = kvferry.host_tensor((4, 2, 8, 16, 2, 64), torch.bfloat16)
        layouts = []
        for inst, role in (("readme-ctx", "context"), ("readme-gen", "generation")):
            lay = kl.Layout(inst, role, kvftest.MODEL, 16, 4)
            kl.vllm_attention(lay, "attn", [0, 1, 2, 3], [raw[i] for i in range(4)])
            layouts.append(lay)
        with kvferry.Client(self.cluster.a.sock, name="c") as c, \
                kvferry.Client(self.cluster.a.sock, name="g") as g:
            c.register(layouts[0])
            g.register(layouts[1])
            for k in ("r1", "r2"):
                c.send(k, {"attn": [1]})
                g.recv(k, "readme-ctx", {"attn": [2]})
            one = g.wait("r1")
            self.assertIsInstance(one, kvferry.Event)
            self.assertEqual((one.key, one.kind), ("r1", "DONE"))
            both = c.wait(["r1", "r2"])
            self.assertEqual({k: e.kind for k, e in both.items() if k in ("r1", "r2")},
                             {"r1": "SENT", "r2": "SENT"})
            self.assertEqual(g.wait(["r2"])["r2"].kind, "DONE")


if __name__ == "__main__":
    unittest.main()
