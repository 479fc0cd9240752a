#!/usr/bin/env python3
"""Writes the seed corpora of the parser fuzzers (tests/fuzz/corpus/<target>) from real inputs.

  tests/fuzz/make_corpus.py BUILD_DIR

store_protocol, wire: the bytes a real 2-rank `hccl-tune bench` over TCP sent (strace of its sockets): the store
requests after each client's hello, each TCP link's hello, and the first frames of a link. table_file: `hccl-tune
export` of the schema-2 test database and of a table the CLI stored. rank_table, daemon_config: the repository's
own files (deploy/hccl-tuned.conf) and the rank tables the rank-table test writes. handlers: the gRPC requests the
clients send, encoded with protoc from text (hccltune/v1/tuner.proto). Re-run after a format changes.
"""
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def strace_streams(build):
    """Runs a 2-rank TCP bench under strace; returns {(pid, fd): bytes sent} in order."""
    hccl = os.path.join(build, "tuner", "hccl-tune")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "trace")
        subprocess.run(["strace", "-f", "-qq", "-xx", "-s", "1048576", "-e", "trace=sendto,sendmsg",
                        "-o", log, hccl, "bench", "--ranks", "2", "--coll", "allreduce",
                        "--min-bytes", "64", "--max-bytes", "64", "--link", "tcp", "--iters", "2", "--warmup", "1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        streams = {}
        pat = re.compile(r'^(\d+)\s+(?:sendto|sendmsg)\((\d+), (?:\{.*?iov_base=)?"((?:\\x[0-9a-f]{2})*)"')
        with open(log) as f:
            for line in f:
                m = pat.match(line)
                if not m:
                    continue
                data = bytes.fromhex(m.group(3).replace("\\x", ""))
                streams.setdefault((m.group(1), m.group(2)), bytearray()).extend(data)
        return streams


def is_requests(data):
    """Whether `data` is a client's request stream (the server's replies start with the same hello)."""
    pos = 0
    while pos < len(data):
        if data[pos] not in (1, 2, 3, 4) or pos + 5 > len(data):
            return False
        strings = 2 if data[pos] in (1, 3) else 1
        pos += 1
        for _ in range(strings):
            if pos + 4 > len(data):
                return False
            n = struct.unpack_from("<I", data, pos)[0]
            pos += 4 + n
    return pos == len(data)


def store_and_wire(build):
    streams = strace_streams(build)
    store_hello = struct.pack("<IIB", 0x48545354, 2, 0)  # hello and the handshake's offer without a secret
    tcp_magic = struct.pack("<I", 0x48544350)
    frame_magic = struct.pack("<I", 0x4854554E)
    n_store = n_hello = n_frame = 0
    for (pid, fd), data in sorted(streams.items()):
        data = bytes(data)
        if data.startswith(store_hello) and len(data) > 9 and is_requests(data[9:]):
            reqs = data[9:]
            write("store_protocol", f"bench_client_{n_store}", reqs)
            write("store_protocol", f"bench_client_{n_store}_head", reqs[:512])
            n_store += 1
        elif data.startswith(tcp_magic):
            klen = struct.unpack_from("<I", data, 20)[0]
            hello = data[:24 + klen]
            write("wire", f"tcp_hello_{n_hello}", b"\x00" + hello)
            n_hello += 1
            rest = data[24 + klen:]
            at = rest.find(frame_magic)
            if at >= 0:
                # The fuzz target receives at operation 5 (tests/fuzz/parser_fuzz.h): the frame is renumbered.
                frame = rest[at:at + 4] + struct.pack("<I", 5) + rest[at + 8:at + 32 + 64]
                size = struct.unpack_from("<Q", frame, 8)[0]
                for mode in (1, 5, 30):  # whole, 2-byte and 8-byte reads
                    write("wire", f"frame_{n_frame}_mode{mode}", bytes([mode, min(size // 4, 255)]) + frame)
                n_frame += 1
    if not (n_store and n_hello and n_frame):
        sys.exit(f"make_corpus: the bench trace held {n_store} store streams, {n_hello} hellos, {n_frame} frames")


def table_file(build):
    hccl = os.path.join(build, "tuner", "hccl-tune")
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "t.db")
        src = os.path.join(ROOT, "tests", "unit", "db", "data", "schema2-format1.db")
        subprocess.run(["cp", src, db], check=True)
        out = subprocess.run([hccl, "export", "--db", db, "-"], check=True, capture_output=True).stdout
        write("table_file", "export_schema2", out)
        write("table_file", "empty", b'{"format":"hccl-tune-tables","format_version":1,"tables":[]}\n')
        write("table_file", "not_ours", b'{"format":"something-else"}')


def rank_tables():
    two = ('{"version": "1.0", "server_count": "2", "status": "completed", "server_list": ['
           '{"server_id": "node-a", "device": [{"device_id": "0", "device_ip": "10.77.1.1", "rank_id": "0"},'
           '{"device_id": "1", "device_ip": "10.77.1.1", "rank_id": "1"}]},'
           '{"server_id": "node-b", "device": [{"device_id": "0", "device_ip": "10.77.1.2", "rank_id": "2"},'
           '{"device_id": "1", "device_ip": "10.77.1.2", "rank_id": "3"}]}]}')
    write("rank_table", "two_servers", two)
    write("rank_table", "one_server", '{"version":"1.0","server_count":"1","status":"completed","server_list":'
          '[{"server_id":"127.0.0.1","device":[{"device_id":"0","device_ip":"127.0.0.1","rank_id":"0"},'
          '{"device_id":"1","device_ip":"127.0.0.1","rank_id":"1"}]}]}')
    write("rank_table", "duplicate_device", two.replace('"device_id": "1", "device_ip": "10.77.1.1"',
                                                        '"device_id": "0", "device_ip": "10.77.1.1"'))


def daemon_config():
    with open(os.path.join(ROOT, "deploy", "hccl-tuned.conf"), "rb") as f:
        write("daemon_config", "deploy_default", f.read())
    write("daemon_config", "user", "socket = /tmp/hccl-tune-1000/tuned.sock\ndb = /tmp/t.db\nlog_level = debug\n"
          "mini_sweep = on\nmini_sweep_idle_s = 5\nonline_window = 128\n")
    write("daemon_config", "bad_line", "max_versions = 1\nno equals sign\n")


def handlers(build):
    proto_dir = os.path.join(ROOT, "proto")
    topo = ('{"format":2,"inter":[{"link":"tcp","network":"10.20.0.0/16"}],"intra":["shm"],"nodes":2,'
            '"ranks_per_node":[8,8],"release":"0.1","runtime":"hccl-tune"}')
    fp = hashlib.sha256(topo.encode()).hexdigest()[:16]
    t = f'topology {{ fingerprint: "{fp}" json: {json_text(topo)} }}'
    entry = ('entries { key { collective: "allreduce" dtype: "fp32" world_size: 16 min_bytes: 0 max_bytes: 65536 } '
             'configuration: "ring(chunk=1M,channels=1,link=shm)" time_us: 12.5 busbw_gbps: 3.2 samples: 20 '
             'runner_up: "one_shot" margin: 0.1 default_margin: 0.3 sweep_id: "sweep-1" library_version: "0.1" '
             'measured_unix_ms: 1700000000000 }')
    entry2 = entry.replace("min_bytes: 0 max_bytes: 65536", "min_bytes: 65536 max_bytes: 0").replace(
        "ring(chunk=1M,channels=1,link=shm)", "halving_doubling(chunk=256K,link=tcp)")
    links = json_text('{"ranks":2,"links":[]}')
    requests = {
        0: ("PutTableRequest", f"{t} {entry} {entry2}"),
        1: ("GetTableRequest", f"{t} world_size: 16"),
        2: ("GetConfigRequest", f'{t} collective: "allreduce" dtype: "fp32" world_size: 16 bytes: 4096'),
        3: ("TimingBatch", f'{t} table_version: 1 client_id: "{fp}/123/0" samples {{ collective: "allreduce" '
                           f'dtype: "fp32" world_size: 16 bytes: 4096 configuration: "ring" duration_us: 11.0 '
                           f'sequence: 7 rank: 0 }}'),
        4: ("DeleteTableRequest", t),
        5: ("RollbackRequest", f"{t} to_version: 1"),
        6: ("PutSweepRequest", 'sweep { id: "sweep-1" params_json: "{\\"ranks\\":2}" status: "running" progress: 0.5 '
                               'started_unix_ms: 1700000000000 }'),
        7: ("AddSweepSamplesRequest", 'sweep_id: "sweep-1" samples { collective: "allreduce" dtype: "fp32" '
                                      'world_size: 2 bytes: 64 configuration: "ring" time_us: 5 rank_time_us: 4 '
                                      'iteration: 1 }'),
        8: ("GetSweepSamplesRequest", 'sweep_id: "sweep-1"'),
        9: ("GetActivityRequest", "window_s: 30"),
        10: ("WatchTableRequest", f"{t} world_size: 16 after_version: 0"),
        11: ("PutLinksRequest", f'links {{ fingerprint: "{fp}" links_json: {links} measured_unix_ms: 1700000000000 }}'),
        12: ("GetLinksRequest", f'fingerprint: "{fp}"'),
    }
    encoded = {}
    for method, (msg, text) in requests.items():
        encoded[method] = subprocess.run(["protoc", f"-I{proto_dir}", f"--encode=hccltune.v1.{msg}",
                                          "hccltune/v1/tuner.proto"], input=text.encode(), check=True,
                                         capture_output=True).stdout

    def seq(*methods):
        return b"".join(bytes([m]) + struct.pack("<H", len(encoded[m])) + encoded[m] for m in methods)

    write("handlers", "put_get", seq(0, 1, 2))
    write("handlers", "put_report_rollback", seq(0, 3, 0, 5, 1))
    write("handlers", "sweep_journal", seq(6, 7, 8, 9))
    write("handlers", "put_delete_watch", seq(0, 10, 4, 1))
    write("handlers", "links", seq(12, 11, 12))


def json_text(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    store_and_wire(build)
    table_file(build)
    rank_tables()
    daemon_config()
    handlers(build)


if __name__ == "__main__":
    main()
