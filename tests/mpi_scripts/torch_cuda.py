"""Worker for tests/torch/test_cuda.py: collectives.torch on a CUDA device (the nccl backend).

Each check returns a detail string on failure (None when it passed) or raises. The timeline is on
(RINGSCOPE_TIMELINE from the test), so the test also reads what the trace says of the GPU work.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import collectives.torch as hvd  # noqa: E402
from collectives import mark_step  # noqa: E402
from tests.mpi_util import run_checks, write_results  # noqa: E402

DEV = None


def _expect(got, want, what, tol=1e-5):
    if got.device != want.device:
        return f"{what}: result on {got.device}, expected {want.device}"
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{what}: got {got.dtype} {tuple(got.shape)}, expected {want.dtype} {tuple(want.shape)}"
    if not torch.allclose(got.double(), want.double(), rtol=tol, atol=tol):
        return f"{what}: max error {(got.double() - want.double()).abs().max().item()}"
    return None


def check_allreduce_dtypes_ops():
    n, bad = hvd.size(), []
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max):
            x = torch.arange(12, device=DEV).reshape(3, 4).to(dtype) + hvd.rank()
            want = {hvd.Sum: sum(torch.arange(12, device=DEV).reshape(3, 4) + r for r in range(n)),
                    hvd.Min: torch.arange(12, device=DEV).reshape(3, 4),
                    hvd.Max: torch.arange(12, device=DEV).reshape(3, 4) + n - 1}.get(op)
            if want is None:
                want = sum(torch.arange(12, device=DEV).reshape(3, 4).double() + r for r in range(n)) / n
                if not dtype.is_floating_point:
                    want = torch.trunc(want)
            got = hvd.allreduce(x, op=op, name=f"cuda.{dtype}.{op}")
            bad.append(_expect(got, want.to(dtype), f"{dtype} {op}", tol=1e-2))
    return "; ".join(b for b in bad if b) or None


def check_fused_bursts_stay_on_device():
    """Three steps of 64 async allreduces (the second and third on the response cache)."""
    n, bad = hvd.size(), []
    for step in range(3):
        mark_step(step)
        ts = [torch.full((257 + i,), float(hvd.rank() + i), device=DEV) for i in range(64)]
        hs = [hvd.allreduce_async(t, op=hvd.Sum, name=f"burst.{i}", priority=int(i == 5))
              for i, t in enumerate(ts)]
        for i, h in enumerate(hs):
            want = torch.full((257 + i,), float(sum(r + i for r in range(n))), device=DEV)
            bad.append(_expect(hvd.synchronize(h), want, f"step {step} tensor {i}"))
    return "; ".join(b for b in bad if b) or None


def check_other_ops():
    n, r, bad = hvd.size(), hvd.rank(), []
    x = torch.full((2, 3), float(r), device=DEV)
    bad.append(_expect(hvd.broadcast(x, root_rank=0), torch.zeros(2, 3, device=DEV), "broadcast"))
    g = hvd.allgather(x)
    want = torch.cat([torch.full((2, 3), float(i), device=DEV) for i in range(n)])
    bad.append(_expect(g, want, "allgather"))
    rs = hvd.reducescatter(torch.ones(2 * n, 3, device=DEV), op=hvd.Sum)
    bad.append(_expect(rs, torch.full((2, 3), float(n), device=DEV), "reducescatter"))
    return "; ".join(b for b in bad if b) or None


def check_distributed_optimizer_trains():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).to(DEV)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    x = torch.randn(64, 16, device=DEV)
    y = x.sum(1, keepdim=True)
    losses = []
    for step in range(30):
        mark_step(100 + step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if any(p.device.type != "cuda" for p in model.parameters()):
        return "parameters left the device"
    if not losses[-1] < 0.5 * losses[0]:
        return f"loss did not fall: {losses[0]:.3f} -> {losses[-1]:.3f}"
    return None


def main():
    global DEV
    hvd.init()
    DEV = torch.device(f"cuda:{hvd.local_rank() % torch.cuda.device_count()}")
    torch.cuda.set_device(DEV)
    results = run_checks((check_allreduce_dtypes_ops, check_fused_bursts_stay_on_device,
                          check_other_ops, check_distributed_optimizer_trains))
    write_results(results)
    hvd.shutdown()


if __name__ == "__main__":
    main()
