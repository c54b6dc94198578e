"""A trainer's optional extra that is missing where it would have been used: one line with the fix, and the
timeline goes on without it (nvtx with Nsight Systems attached, pynvml on a host with an NVIDIA GPU)."""
import sys

from tracer import counters
from tracer.nvtx_emitter import load_emitter


def test_nsight_attached_without_nvtx_says_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nvtx", None)   # the import fails, as without the extra
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    assert load_emitter() is None and capsys.readouterr().err == ""   # no Nsight: nothing to say
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    assert load_emitter() is None
    assert capsys.readouterr().err.strip().splitlines() == [
        "ringscope: Nsight Systems is attached but the nvtx package is missing, so the timeline's NVTX ranges are "
        "off: pip install 'ringscope[nvtx]'"]


def test_a_gpu_host_without_pynvml_says_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(counters, "NVIDIA_CONTROL", str(tmp_path / "nvidiactl"))
    assert counters.NvmlGpu.open(0) is None and capsys.readouterr().err == ""   # no GPU: nothing to say
    (tmp_path / "nvidiactl").touch()
    assert counters.NvmlGpu.open(0) is None
    assert capsys.readouterr().err.strip().endswith("GPU counters are off: pip install 'ringscope[gpu]'")
