"""Elastic state without MPI: commit/restore round trips of model, optimizer and sampler state,
the sampler's repartitioning over a new world size, and the driver's pure parts."""
from __future__ import annotations

import argparse
import json

import pytest
import torch

from collectives import launcher
from collectives.elastic import driver, membership
from collectives.elastic.journal import Journal
from collectives.elastic.run import reset_args
from collectives.elastic.state import ObjectState
from collectives.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from collectives.handles import CollectiveError
from collectives.torch.elastic import ElasticSampler, TorchState


def _training(seed: int = 0):
    torch.manual_seed(seed)
    data = torch.utils.data.TensorDataset(torch.randn(40, 3), torch.randn(40, 1))
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    sampler = ElasticSampler(data, shuffle=True, seed=7, num_replicas=2, rank=0)
    return data, model, opt, sched, sampler


def _steps(data, model, opt, sched, sampler, n):
    loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler)
    for i, (x, y) in zip(range(n), loader):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
        sampler.record_batch(i, 4)


def _snapshot(model, opt, sched, sampler):
    return ({k: v.clone() for k, v in model.state_dict().items()},
            [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()],
            sched.state_dict()["last_epoch"], opt.param_groups[0]["lr"], sampler.state_dict())


def _assert_same(a, b):
    for k in a[0]:
        assert torch.equal(a[0][k], b[0][k]), k
    for x, y in zip(a[1], b[1]):
        assert torch.equal(x, y)
    assert a[2:] == b[2:]


def test_torch_state_commit_restore_round_trip():
    data, model, opt, sched, sampler = _training()
    state = TorchState(model, opt, scheduler=sched, sampler=sampler, epoch=3, note="x")
    _steps(data, model, opt, sched, sampler, 3)
    state.epoch = 4
    state.save()
    committed = _snapshot(model, opt, sched, sampler)
    blob = state.to_bytes()
    _steps(data, model, opt, sched, sampler, 2)          # uncommitted work
    state.epoch = 5
    assert sampler.state_dict() != committed[4]
    state.restore()                                       # back to the commit, in place
    _assert_same(_snapshot(model, opt, sched, sampler), committed)
    assert state.epoch == 4

    # a new process (another world) rebuilds from the committed bytes
    _, model2, opt2, sched2, sampler2 = _training(seed=1)
    state2 = TorchState(model2, opt2, scheduler=sched2, sampler=sampler2, epoch=0, note="")
    state2.from_bytes(blob)
    _assert_same(_snapshot(model2, opt2, sched2, sampler2), committed)
    assert (state2.epoch, state2.note) == (4, "x")


def test_object_state_round_trip_and_reset_callbacks():
    calls = []
    s = ObjectState(bcast_object=lambda x: x, get_rank=lambda: 0, step=1, w=[1.0])
    s.register_reset_callbacks([lambda: calls.append("a"), lambda: calls.append("b")])
    s.step, s.w = 5, [2.0]
    s.save()
    blob = s.to_bytes()
    s.step = 9
    s.restore()
    assert (s.step, s.w) == (5, [2.0])
    t = ObjectState(bcast_object=lambda x: x, get_rank=lambda: 0, step=0, w=[])
    t.from_bytes(blob)
    assert (t.step, t.w) == (5, [2.0])
    s.on_reset()
    assert calls == ["a", "b"]


def test_sampler_repartitions_the_rest_of_the_epoch():
    data = list(range(50))
    four = [ElasticSampler(data, seed=1, num_replicas=4, rank=r) for r in range(4)]
    seen = []
    for s in four:                      # 2 batches of 3 on each of 4 ranks
        idx = list(s)[:6]
        seen += idx
        s.record_batch(0, 3)
        s.record_batch(1, 3)
    assert len(set(seen)) == 24
    saved = four[0].state_dict()
    assert saved == {"epoch": 0, "processed_num": 24}
    three = [ElasticSampler(data, seed=1, num_replicas=3, rank=r) for r in range(3)]
    for s in three:
        s.load_state_dict(saved)
    rest = [i for s in three for i in s]
    assert set(rest) == set(data) - set(seen)          # every unprocessed index, none redone
    assert len(rest) == 27 and len(three[0]) == 9       # 26 left, padded to a multiple of 3
    three[0].set_epoch(1)
    assert three[0].processed_num == 0 and len(three[0]) == 17


def test_exceptions_under_horovod_names():
    import collectives
    import collectives.torch as hvd
    assert HorovodInternalError is CollectiveError
    assert hvd.elastic.HostsUpdatedInterrupt is HostsUpdatedInterrupt
    assert collectives.elastic.HorovodInternalError is HorovodInternalError
    assert HostsUpdatedInterrupt(True).skip_sync is True
    assert hvd.elastic.TorchState is TorchState and hvd.elastic.run is collectives.elastic.run


def test_membership_parse_take_and_lost_slots():
    hosts = membership.parse_hosts("h1:2,h2\nh1:1", "-H")
    assert hosts == [("h1", 3), ("h2", 1)]
    assert membership.take(hosts, 2) == [("h1", 2)]
    assert membership.host_of_rank(hosts, 3) == "h2"
    m = membership.Membership(hosts)
    m.lose("h1")
    assert m.available() == [("h1", 2), ("h2", 1)]
    with pytest.raises(membership.MembershipError, match="-H: 'h3:x' is not host"):
        membership.parse_hosts("h3:x", "-H")


def test_discovery_script_failure_is_one_line(tmp_path):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho 'no hosts today' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(membership.MembershipError) as err:
        membership.Membership(discovery_script=str(script))
    assert str(err.value) == f"host discovery script {script} exited 3: no hosts today"


def test_guarded_command_starts_each_rank_through_its_guard():
    cmd = ["mpiexec", "-n", "3", "-hosts", "a:2,b:1", "/py", "train.py", "--x", "1"]
    out = driver._guarded(cmd, 3)
    assert out[:6] == ["mpiexec", "-disable-auto-cleanup", "-n", "3", "-hosts", "a:2,b:1"]
    assert out[7:] == [str(driver.GUARD), "/py", "train.py", "--x", "1"]


def test_reset_args_phases():
    rec = {"kind": "lost", "failed_epoch_ns": 1_000_000_000, "detected_epoch_ns": 1_200_000_000,
           "reformed_epoch_ns": 3_200_000_000, "restored_epoch_ns": 3_500_000_000,
           "last_commit_epoch_ns": 900_000_000, "first_step_end_epoch_ns": 3_600_000_000}
    args = reset_args(rec, 3_550_000_000, generation=2)
    assert not any(k.endswith("_epoch_ns") for k in args)
    assert args == {"kind": "lost", "detect_ms": 200.0, "reform_ms": 2000.0, "restore_ms": 300.0,
                    "first_step_ms": 50.0, "lost_ms": 2550.0, "redone_ms": 100.0,
                    "generation": 2}


def test_journal_is_replaced_whole(tmp_path):
    j = Journal(tmp_path / "tl", 2, None)
    j.data["generations"].append({"generation": 0})
    j.write()
    assert json.loads((tmp_path / "tl" / "elastic.json").read_text())["generations"] == [
        {"generation": 0}]
    assert [p.name for p in (tmp_path / "tl").iterdir()] == ["elastic.json"]


@pytest.mark.parametrize("argv,message", [
    (["-np", "2", "--min-np", "1", "x.py"], "--min-np needs --elastic"),
    (["--elastic", "-np", "2", "--min-np", "3", "x.py"], "--min-np must be between 1 and -np"),
    (["--elastic", "-np", "4", "--max-np", "3", "x.py"], "--max-np must be at least -np"),
    (["--elastic", "-np", "2", "-H", "a:2", "--host-discovery-script", "d", "x.py"],
     "give -H or --host-discovery-script, not both"),
])
def test_launcher_rejects_bad_elastic_options(argv, message, capsys):
    with pytest.raises(SystemExit):
        launcher.parse(argv)
    assert message in capsys.readouterr().err


def test_launcher_elastic_defaults():
    ns = launcher.parse(["--elastic", "-np", "3", "x.py"])
    assert isinstance(ns, argparse.Namespace)
    assert (ns.min_np, ns.max_np) == (3, None)
