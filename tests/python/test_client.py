"""kvferry.Client against real kvferryd processes: connect/register/send/recv/cancel/events,
typed errors, the ABI check, string ids, host tensors, selectors and asyncio, the hybrid model
of examples/python on the same-daemon and the two-daemon path (TP 1 <-> 2, n_readers counted
by the daemon), a daemon restart mid-stream, and the registration time of 160 tensors."""
import asyncio
import ctypes
import ctypes.util
import errno
import fcntl
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import kvftest
import torch

import hybrid
import kvferry
from kvferry import _lib, layout as kl


class Library(unittest.TestCase):
    def test_version_and_abi(self):
        with open(os.path.join(kvftest.ROOT, "VERSION")) as f:
            self.assertEqual(kvferry.__version__, f.read().strip())
        self.assertEqual(kvferry.library_version(), kvferry.__version__)
        self.assertEqual(_lib.lib().kvf_abi_version(), kvferry.ABI_VERSION)

    def test_abi_mismatch_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            src, so = os.path.join(d, "old.c"), os.path.join(d, "libold.so")
            with open(src, "w") as f:
                f.write("unsigned kvf_abi_version(void) { return 1; }\n")
            subprocess.check_call(["cc", "-shared", "-fPIC", "-o", so, src])
            with self.assertRaises(kvferry.KvferryError) as cm:
                _lib.load(so)
            self.assertIn("ABI 1", str(cm.exception))
            self.assertIn("ABI 4", str(cm.exception))

    def test_library_without_abi_symbol_is_refused(self):
        with self.assertRaises(kvferry.KvferryError) as cm:
            _lib.load(ctypes.util.find_library("m"))
        self.assertIn("kvf_abi_version", str(cm.exception))

    def test_installed_layout_finds_its_library(self):
        # make install's layout: PREFIX/lib/python3/dist-packages/kvferry, PREFIX/lib/libkvferry.so.0
        import shutil
        with tempfile.TemporaryDirectory() as d:
            pydir = os.path.join(d, "usr", "lib", "python3", "dist-packages")
            shutil.copytree(os.path.join(kvftest.ROOT, "python", "kvferry"),
                            os.path.join(pydir, "kvferry"))
            shutil.copy(_lib.lib()._name, os.path.join(d, "usr", "lib", "libkvferry.so.0"))
            env = {k: v for k, v in os.environ.items() if k not in ("KVFERRY_LIB", "BUILD")}
            env["PYTHONPATH"] = pydir
            out = subprocess.check_output(
                [sys.executable, "-c", "import kvferry, kvferry._lib as l; print(l.lib()._name)"],
                env=env, cwd=d, text=True)
            self.assertEqual(out.strip(), os.path.join(d, "usr", "lib", "libkvferry.so.0"))

    def test_struct_sizes_match_the_header(self):
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "sz.c"), os.path.join(d, "sz")
            with open(src, "w") as f:
                f.write('#include "kvferry.h"\n#include <stdio.h>\nint main(void){printf("%zu %zu '
                        '%zu %zu", sizeof(struct kvf_pool), sizeof(struct kvf_event), '
                        'sizeof(struct kvf_recv_args), sizeof(struct kvf_options));return 0;}\n')
            subprocess.check_call(["cc", "-I", os.path.join(kvftest.ROOT, "lib"), "-o", exe, src])
            pool, ev, recv, opt = map(int, subprocess.check_output([exe]).split())
        self.assertEqual(pool, ctypes.sizeof(_lib.Pool))
        self.assertEqual(ev, ctypes.sizeof(_lib.Event))
        self.assertEqual(recv, ctypes.sizeof(_lib.RecvArgs))
        # h13a appends err/errlen to kvf_options; before that merge the header is 16 bytes short
        self.assertIn(ctypes.sizeof(_lib.Options) - opt, (0, 16))


class Ids(unittest.TestCase):
    def test_string_ids_hash_like_libsodium_generichash_8(self):
        sodium = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
        for key in ("req-1", "chatcmpl-7f3a", "ü-ñ", "x" * 300):
            out = (ctypes.c_uint8 * 8)()
            data = key.encode()
            self.assertEqual(sodium.crypto_generichash(out, 8, data, ctypes.c_ulonglong(len(data)),
                                                       None, 0), 0)
            want = int.from_bytes(bytes(out), "little") or 1
            self.assertEqual(kvferry.request_id(key), want)

    def test_known_answer(self):
        self.assertEqual(kvferry.request_id("req-1"), kvferry.request_id(b"req-1"))
        self.assertEqual(kvferry.request_id(42), 42)
        for bad in (0, -1, 1 << 64, "", 1.5, True):
            with self.assertRaises((ValueError, TypeError)):
                kvferry.request_id(bad)


class HostTensor(unittest.TestCase):
    def test_sealed_memfd_zero_copy(self):
        t = kvferry.host_tensor((3, 5), torch.float32)
        self.assertEqual(tuple(t.shape), (3, 5))
        self.assertFalse(bool(t.any()))
        r = kvferry.memory.region_of(t)
        seals = fcntl.fcntl(r.pool.fd, 1034)  # F_GET_SEALS
        self.assertTrue(seals & 0x2)  # F_SEAL_SHRINK
        t[1, 2] = 7.0
        raw = os.pread(r.pool.fd, 4, (1 * 5 + 2) * 4)
        self.assertEqual(raw, torch.tensor([7.0]).numpy().tobytes())  # the same pages


class ClientBasics(kvftest.DaemonCase):
    def layout(self, inst, role):
        raw = kvferry.host_tensor((2, 8, 2, 16, 2, 64), torch.bfloat16)
        lc = kl.Layout(inst, role, kvftest.MODEL, 16, 4)
        kl.vllm_attention(lc, "attn", [0, 1], [raw[0], raw[1]], backend="flashinfer")
        return lc, raw

    def test_connect_to_nothing_is_connection_error(self):
        with self.assertRaises(ConnectionError) as cm:
            kvferry.Client(os.path.join(self.cluster.top, "nope.sock"))
        self.assertIn(cm.exception.errno, (errno.ENOENT, errno.ECONNREFUSED))

    def test_register_refusal_is_typed(self):
        lc, _ = self.layout("refused", "context")
        lc.tokens_per_block = 0
        with kvferry.Client(self.cluster.a.sock) as c:
            with self.assertRaises(kvferry.RegistrationError) as cm:
                c.register(lc)
            self.assertEqual(cm.exception.error, "BAD_REQUEST")
            self.assertIn("tokens_per_block", cm.exception.message)

    def test_recv_from_unknown_instance_is_typed(self):
        lg, _ = self.layout("lonely-gen", "generation")
        with kvferry.Client(self.cluster.a.sock) as g:
            g.register(lg)
            g.recv("nobody-1", "no-such-instance", {"attn": [0]})  # deadlines.lookup: 2 s
            with self.assertRaises(kvferry.TransferError) as cm:
                g.wait("nobody-1", 30)
            self.assertEqual(cm.exception.error, "UNKNOWN_INSTANCE")
            self.assertEqual(cm.exception.key, "nobody-1")

    def test_cancel_and_errno_errors(self):
        lc, _ = self.layout("cancel-ctx", "context")
        with kvferry.Client(self.cluster.a.sock) as c:
            with self.assertRaises(kvferry.KvferryError):
                c.send("early", {"attn": [0]})  # not registered yet
            c.register(lc)
            c.send("c-1", {"attn": [0, 1]})
            with self.assertRaises(FileExistsError):
                c.send("c-1", {"attn": [2]})
            self.assertEqual(c.inflight, 1)
            c.cancel("c-1")
            ev = c.poll(30)
            self.assertEqual((ev.kind, ev.error, ev.key), ("FAILED", "CANCELLED", "c-1"))
            with self.assertRaises(FileNotFoundError):
                c.cancel("c-1")
            with self.assertRaises(kvferry.TransferError):
                ev.raise_for_error()

    def test_selectors_and_asyncio_see_events(self):
        lc, _ = self.layout("sel-ctx", "context")
        lg, _ = self.layout("sel-gen", "generation")
        with kvferry.Client(self.cluster.a.sock) as c, kvferry.Client(self.cluster.a.sock) as g:
            c.register(lc)
            g.register(lg)
            sel = selectors.DefaultSelector()
            sel.register(c, selectors.EVENT_READ)  # fileno()
            c.send("sel-1", {"attn": [1]})
            g.recv("sel-1", "sel-ctx", {"attn": [2]})
            self.assertEqual(g.wait("sel-1").kind, "DONE")
            self.assertTrue(sel.select(30))
            self.assertEqual([e.kind for e in c.events()], ["SENT"])
            sel.close()

            async def run():
                loop = asyncio.get_running_loop()
                fut = loop.create_future()

                def readable():
                    for e in g.events():
                        if not fut.done():
                            fut.set_result(e)
                loop.add_reader(g.fileno(), readable)
                c.send("aio-1", {"attn": [3]})
                g.recv("aio-1", "sel-ctx", {"attn": [4]})
                try:
                    return await asyncio.wait_for(fut, 30)
                finally:
                    loop.remove_reader(g.fileno())
            self.assertEqual(asyncio.run(run()).kind, "DONE")
            c.wait("aio-1")

    def vmm_layout(self, n_chunks):
        """A layout whose pool is declared as CUDA VMM memory of n_chunks (memfds stand in for
        the chunk fds: the daemon here runs in CPU mode and refuses before importing)."""
        lc, raw = self.layout("vmm-%d" % n_chunks, "context")
        (region,) = lc.regions()
        chunk = 2 << 20
        fds = [os.memfd_create("chunk") for _ in range(n_chunks)]
        vr = kvferry.vmm_region(region.ptr, region.nbytes, 0, fds, chunk, region.ptr)
        for f in fds:
            os.close(f)
        for _, _, _, parts in lc.groups:
            for p in parts:
                p.regions = [vr] * len(p.regions)
        return lc, vr

    def test_vmm_pool_reaches_the_daemon_with_its_fds(self):
        lc, vr = self.vmm_layout(3)
        with kvferry.Client(self.cluster.a.sock) as c:
            with self.assertRaises(kvferry.RegistrationError) as cm:
                c.register(lc)
        # a refusal that says why (not a protocol violation: the frame carried the 3 chunk fds)
        self.assertIn("cannot map GPU memory", cm.exception.message)
        kvferry.memory.release(vr)

    def test_vmm_pool_with_too_many_chunks_is_refused_by_the_library(self):
        lc, vr = self.vmm_layout(1)
        many = (ctypes.c_int32 * 1025)(*([vr.pool.fds[0]] * 1025))  # checked before any dup
        vr.pool.fds = ctypes.cast(many, ctypes.POINTER(ctypes.c_int32))
        vr.pool.n_fds = 1025
        vr.pool.chunk_bytes = 4096
        with kvferry.Client(self.cluster.a.sock) as c:
            with self.assertRaises(kvferry.RegistrationError) as cm:
                c.register(lc)
        self.assertIn("1..1024 chunk fds", cm.exception.message)
        vr.pool.n_fds = 1
        kvferry.memory.release(vr)

    def test_registration_time_160_tensors(self):
        # SGLang-style: 80 layers, a k_buffer and a v_buffer each, 160 separate allocations
        # (160 memfds: pools ahead in FDS frames), per-layer views
        k = [kvferry.host_tensor((16 * 16, 2, 64), torch.bfloat16) for _ in range(80)]
        v = [kvferry.host_tensor((16 * 16, 2, 64), torch.bfloat16) for _ in range(80)]
        t0 = time.perf_counter()
        lc = kl.Layout("big", "context", kvftest.MODEL, 16, 80)
        kl.sglang_mha(lc, "mha", list(range(80)), k, v)
        t1 = time.perf_counter()
        with kvferry.Client(self.cluster.a.sock) as c:
            c.register(lc)
            t2 = time.perf_counter()
        self.assertEqual(len(lc.regions()), 160)
        self.assertIn("per_layer", lc.to_dict()["groups"][0]["views"][0])
        print("\n  160 tensors (80 layers, k and v buffers, 160 pools): layout from the tensors "
              "%.1f ms, REGISTER answered %.1f ms, total %.1f ms"
              % ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t0) * 1e3), flush=True)
        self.assertLess(t2 - t0, 10.0)


class Hybrid:
    """The example's hybrid model (per-layer attention + KDA state) moved with torch.equal."""
    TWO = False

    def run_tp(self, ctx_tp, gen_tp, n_req=3):
        tag = "%s-%d-%d" % ("two" if self.TWO else "one", ctx_tp, gen_tp)
        ctxs = [hybrid.HybridCache(24, 4, ctx_tp, r) for r in range(ctx_tp)]
        gens = [hybrid.HybridCache(24, 4, gen_tp, r) for r in range(gen_tp)]
        cl = self.cluster
        cc = [kvferry.Client(cl.a.sock, name="ctx %d" % r) for r in range(ctx_tp)]
        gc = [kvferry.Client(cl.b.sock, name="gen %d" % r) for r in range(gen_tp)]
        try:
            for c, h in zip(cc, ctxs):
                c.register(h.layout("ctx-" + tag, "context"))
            for g, h in zip(gc, gens):
                g.register(h.layout("gen-" + tag, "generation"))
            full = ctxs[0] if ctx_tp == 1 else gens[0]
            for q in range(n_req):
                key = "%s-req-%d" % (tag, q)
                cb, gb, cs, gs = [2 * q, 2 * q + 1], [20 - q, 10 + q], q % 4, (q + 1) % 4
                for h in ctxs:
                    h.fill(q + 100 * h.tp_rank, cb, cs)
                for c in cc:
                    c.send(key, {"attn": cb, "kda": cs})  # n_readers 0: the daemon counts
                for g in gc:
                    g.recv(key, "ctx-" + tag, {"attn": gb, "kda": gs},
                           ctx_home=cl.a.home if self.TWO else None)
                for g in gc:
                    self.assertEqual(g.wait(key, 30).kind, "DONE")
                for c in cc:
                    ev = c.wait(key, 30)
                    self.assertEqual(ev.kind, "SENT")
                    readers = gen_tp if gen_tp > ctx_tp else 1  # gen ranks reading each ctx rank
                    self.assertIn("%d of %d readers served (counted by the daemon)"
                                  % (readers, readers), ev.message)
                # every byte: the TP 1 side's request equals the TP 2 ranks' shards
                if ctx_tp == gen_tp:
                    for a, b in zip(ctxs, gens):
                        self.assertTrue(a.equal(b, cb, gb, cs, gs))
                else:
                    parts = gens if gen_tp > 1 else ctxs
                    blocks_full, slot_full = (cb, cs) if ctx_tp == 1 else (gb, gs)
                    blocks_part, slot_part = (gb, gs) if gen_tp > 1 else (cb, cs)
                    for r, p in enumerate(parts):
                        want = full.shard(blocks_full, slot_full, len(parts), r)
                        got = p.request_tensors(blocks_part, slot_part)
                        self.assertEqual(len(want), len(got))
                        for x, y in zip(want, got):
                            self.assertTrue(torch.equal(x, y))
        finally:
            for c in cc + gc:
                c.close()

    def test_tp1_to_tp1(self):
        self.run_tp(1, 1)

    def test_tp2_to_tp1(self):
        self.run_tp(2, 1)

    def test_tp1_to_tp2(self):
        self.run_tp(1, 2)


class HybridSameDaemon(Hybrid, kvftest.DaemonCase):
    TWO = False


class HybridTwoDaemons(Hybrid, kvftest.DaemonCase):
    TWO = True


class ConnectRefused(unittest.TestCase):
    """A refused kvf_connect raises ConnectionError carrying the daemon's own reason (opt.err)."""

    def test_refusal_says_why_in_the_daemons_words(self):
        with open(os.path.join(kvftest.ROOT, "lib", "kvferry.h")) as f:
            if "char *err;" not in f.read():
                self.skipTest("this tree's kvf_options has no err field (issue 13 adds it)")
        top = tempfile.mkdtemp(prefix="kvf-py-refuse-")
        d = kvftest.kvfharness.Daemon(top, "a", extra="workers:\n  max_conns_per_uid: 1\n")
        d.start()
        try:
            with kvferry.Client(d.sock, name="first", reconnect=False):
                with self.assertRaises(ConnectionError) as cm:
                    kvferry.Client(d.sock, name="second", reconnect=False)
            self.assertIn("workers.max_conns_per_uid 1", str(cm.exception))
        finally:
            d.stop()
            shutil.rmtree(top, ignore_errors=True)


class Restart(unittest.TestCase):
    def test_daemon_restart_mid_stream(self):
        with kvftest.kvfharness.Cluster() as cl:
            ctx, gen = hybrid.HybridCache(16, 4), hybrid.HybridCache(16, 4)
            c = kvferry.Client(cl.a.sock, name="ctx")
            g = kvferry.Client(cl.a.sock, name="gen")
            c.register(ctx.layout("r-ctx", "context"))
            g.register(gen.layout("r-gen", "generation"))
            ctx.fill(1, [1, 2], 0)
            c.send("before", {"attn": [1, 2], "kda": 0})
            g.recv("before", "r-ctx", {"attn": [3, 4], "kda": 1})
            g.wait("before")
            c.wait("before")
            c.send("in-flight", {"attn": [5], "kda": 2})  # no reader: stays in flight
            cl.a.stop(9)  # SIGKILL: the daemon dies mid-stream
            kinds = []
            deadline = time.monotonic() + 30
            while "in-flight" not in [k for k, _ in kinds] and time.monotonic() < deadline:
                e = c.poll(1)
                if e:
                    kinds.append((e.key, e.error))
            self.assertIn(("in-flight", "PEER_LOST"), kinds)
            with self.assertRaises(OSError) as cm:
                c.send("while-down", {"attn": [6], "kda": 3})
            self.assertEqual(cm.exception.errno, errno.ENOTCONN)
            cl.a.start()
            for cli in (c, g):  # reconnect and re-register the same layout and pools
                seen = []
                deadline = time.monotonic() + 30
                while "RECONNECTED" not in seen and time.monotonic() < deadline:
                    e = cli.poll(1)
                    if e:
                        seen.append(e.kind)
                self.assertIn("RECONNECTED", seen)
            ctx.fill(2, [7, 8], 3)
            c.send("after", {"attn": [7, 8], "kda": 3})
            g.recv("after", "r-ctx", {"attn": [9, 10], "kda": 2})
            self.assertEqual(g.wait("after").kind, "DONE")
            self.assertEqual(c.wait("after").kind, "SENT")
            self.assertTrue(ctx.equal(gen, [7, 8], [9, 10], 3, 2))
            c.close()
            g.close()


if __name__ == "__main__":
    unittest.main()
