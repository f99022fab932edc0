"""The hardware fingerprint's parsing and the EC2 metadata lookup (against a local fake IMDS)."""

from __future__ import annotations

import http.server
import threading
import urllib.request

import pytest

from lightning_module.run import hardware

CPUINFO_2_SOCKETS = "".join(
    f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C @ 2.40GHz\n"
    f"physical id\t: {i // 4}\ncore id\t: {(i % 4) // 2}\ncpu MHz\t\t: 3000.0\n"
    "flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile\n\n"
    for i in range(8)
)


def test_parse_cpuinfo_counts_physical_cores_and_picks_isa_flags():
    got = hardware.parse_cpuinfo(CPUINFO_2_SOCKETS)
    assert got["cpu_model"].startswith("Intel(R) Xeon(R) Platinum 8488C")
    assert got["cpu_manufacturer"] == "intel"
    assert got["logical_cpus"] == 8 and got["physical_cores"] == 4  # 2 sockets x 2 cores, 2 threads each
    assert got["isa_flags"] == ["amx_bf16", "amx_tile", "avx2", "avx512_bf16", "avx512_vnni", "avx512f", "fma"]
    assert got["cpu_clock_ghz"] == 2.4  # the nominal clock in the name, not the momentary MHz


def test_parse_cpuinfo_without_core_ids_or_clock_in_the_name():
    text = "processor : 0\nvendor_id : AuthenticAMD\nmodel name : AMD EPYC\ncpu MHz : 2445.426\nflags : avx2 fma\n\n"
    got = hardware.parse_cpuinfo(text)
    assert got["cpu_manufacturer"] == "amd" and got["cpu_clock_ghz"] == pytest.approx(2.445, abs=1e-3)
    assert got["physical_cores"] is None and got["logical_cpus"] == 1


def test_fingerprint_of_this_machine_and_versions():
    fp = hardware.fingerprint()
    assert fp.physical_cores and fp.physical_cores >= 1 and fp.ram_gib and fp.ram_gib > 0
    assert fp.numa_nodes is None or fp.numa_nodes >= 1
    v = hardware.software_versions()
    assert v.torch and v.lightning and v.python


def test_numa_nodes_from_sysfs(tmp_path):
    for d in ("node0", "node1", "possible", "power"):
        (tmp_path / d).mkdir()
    assert hardware.numa_nodes(str(tmp_path)) == 2
    assert hardware.numa_nodes(str(tmp_path / "missing")) is None


class FakeIMDS(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self.send_response(200 if ok else 400)
        self.end_headers()
        self.wfile.write(b"tok123")

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != "tok123":  # IMDSv2: no token, no answer
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"c7i.2xlarge")

    def log_message(self, *args):
        pass


def test_instance_type_from_imdsv2(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), FakeIMDS)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(hardware, "IMDS", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        assert hardware.ec2_instance_type() == "c7i.2xlarge"
    finally:
        server.shutdown()


def test_off_ec2_the_lookup_is_silent_and_quick(monkeypatch, caplog):
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    monkeypatch.setattr(hardware, "IMDS", "http://127.0.0.1:9")  # nothing listens on the discard port
    opened = []
    real_open = urllib.request.OpenerDirector.open

    def counted(self, req, data=None, timeout=None):
        opened.append(timeout)
        return real_open(self, req, data, timeout)

    monkeypatch.setattr(urllib.request.OpenerDirector, "open", counted)
    assert hardware.ec2_instance_type(timeout=0.5) is None
    assert opened == [0.5]  # one refused token request, bounded by its timeout: no retries, no second call
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_memory_channels_from_edac_sysfs(tmp_path):
    # Two controllers: three populated channels on mc0 (two DIMMs on one), one on mc1, an empty slot.
    for mc, dimm, where, mb in (("mc0", "dimm0", "channel 0 slot 0", 16384), ("mc0", "dimm1", "channel 0 slot 1", 16384),
                                ("mc0", "dimm2", "channel 1 slot 0", 16384), ("mc0", "dimm3", "channel 2 slot 0", 16384),
                                ("mc1", "dimm0", "channel 0 slot 0", 16384), ("mc1", "dimm1", "channel 1 slot 0", 0)):
        d = tmp_path / mc / dimm
        d.mkdir(parents=True)
        (d / "dimm_location").write_text(where + " \n")
        (d / "size").write_text(f"{mb}\n")
    assert hardware.memory_channels(str(tmp_path)) == 4
    assert hardware.memory_channels(str(tmp_path / "missing")) is None  # a VM: the OS does not say
