"""Run one response on this rank: pack, call the backend, scale, unpack, complete the handles."""
from __future__ import annotations

from collectives import messages as M
from collectives.adapters import ITEMSIZE
from collectives.backends.registry import get_backend
from collectives.ops import ReduceOp, backend_op
from tracer import get_recorder
from tracer import vocab as V


class Executor:
    def __init__(self, config, sets, fusion_buffers, complete_many):
        self.config = config
        self.sets = sets
        self.buffers = fusion_buffers
        self._complete_many = complete_many   # complete_many([(entry, result, error)])

    def complete(self, e, result=None, error=None) -> None:
        self._complete_many([(e, result, error)])

    def complete_many(self, done) -> None:
        self._complete_many(done)

    def run(self, resp: M.Response, entries: list, t_response: int | None = None) -> None:
        """Run one response; ``t_response`` is when it arrived (when recording)."""
        rec = get_recorder()
        comm = self.sets.get(resp.process_set)
        comm.response = resp.id
        backend = get_backend(resp.backend, self.config)
        run = getattr(self, "_" + resp.op_type.lower())
        if not rec.enabled:
            run(resp, entries, comm, backend, rec)
            return
        # a fused response is an allreduce: its bytes (summed by the coordinator) are this rank's
        # too; the names list is the response's own (never changed after it arrived). queue_ns:
        # every tensor's negotiation ends when the response arrived and its QUEUE phase lasts
        # until the span starts (written once here, not per tensor)
        args = {V.ARG_RESPONSE: resp.id, V.ARG_TENSORS: resp.names, V.ARG_COUNT: len(resp.names),
                V.ARG_BYTES: resp.nbytes if len(entries) > 1 else entries[0].nbytes,
                V.ARG_DTYPE: resp.dtype, V.ARG_OP: resp.op_type, V.ARG_REDUCE_OP: resp.reduce_op,
                V.ARG_BACKEND: resp.backend, V.ARG_THRESHOLD: self.config.fusion_threshold,
                V.ARG_PROCESS_SET: resp.process_set, V.ARG_STEP: rec.step,
                V.ARG_PRIORITY: resp.priority}
        if t_response is not None:
            args[V.ARG_QUEUE_NS] = rec.now() - t_response
        with rec.span(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, args):
            run(resp, entries, comm, backend, rec)

    # ---- allreduce (fused) -------------------------------------------------------------------
    def _allreduce(self, resp, entries, comm, backend, rec):
        ad = entries[0].adapter
        op = ReduceOp(resp.reduce_op)
        src = None
        if len(entries) == 1:
            e = entries[0]
            # backends that take a separate input save the copy into the output buffer
            direct = getattr(backend, "takes_src", False) and resp.prescale == 1.0
            buf = self._output_flat(e, copy_input=not direct)
            if direct:
                src = ad.flat(e.tensor)
                if src is buf or _same_memory(ad, src, buf):
                    src = None
            fused = False
        else:
            total = resp.nbytes // ITEMSIZE[resp.dtype]   # (the response's bytes are its tensors')
            buf = self.buffers.get(ad, entries[0].device, resp.dtype, total)
            t0 = rec.now() if rec.enabled else 0
            ad.pack(buf, [e.tensor for e in entries])
            if rec.enabled:
                t1 = rec.now()
                rec.complete(V.TID_FUSION, V.MEMCPY_IN_FUSION_BUFFER, V.CAT_MEMCPY, t0, t1,
                             {V.ARG_RESPONSE: resp.id})
                rec.counter(V.COUNTER_FUSION_FILL, resp.nbytes, t1)
            fused = True
        ad.scale_(buf, resp.prescale)
        if src is None:
            backend.allreduce(buf, backend_op(op), comm)
        else:
            backend.allreduce(buf, backend_op(op), comm, src=src)
        if op is ReduceOp.Average:
            ad.average_(buf, comm.size)
        ad.scale_(buf, resp.postscale)
        if not fused:
            self.complete(entries[0], ad.result(entries[0], buf))
            return
        t0 = rec.now() if rec.enabled else 0
        outs = ad.unpack(buf, [e.meta["numel"] for e in entries], [e.output for e in entries])
        if rec.enabled:
            rec.complete(V.TID_FUSION, V.MEMCPY_OUT_FUSION_BUFFER, V.CAT_MEMCPY, t0, rec.now(),
                         {V.ARG_RESPONSE: resp.id})
        # (an in-place op's result is its output, which unpack filled)
        self.complete_many([(e, out if out is e.output else ad.result(e, out), None)
                            for e, out in zip(entries, outs)])

    def _output_flat(self, e, copy_input):
        """A flat buffer for e's result (input copied in when asked): ``entry.output``'s own memory
        when the adapter can give a flat view of it (in-place ops), else a fresh buffer."""
        ad = e.adapter
        if e.output is not None and hasattr(ad, "inplace_flat"):
            view = ad.inplace_flat(e.output)
            if view is not None:
                if copy_input and e.output is not e.tensor:
                    ad.copy_(view, 0, ad.flat(e.tensor))
                return view
        out = ad.empty(e.meta["numel"], e.dtype, e.device)
        if copy_input:
            ad.copy_(out, 0, ad.flat(e.tensor))
        return out

    # ---- other ops ---------------------------------------------------------------------------
    def _allgather(self, resp, entries, comm, backend, rec):
        e = entries[0]
        ad = e.adapter
        row = e.meta["row_numel"]
        dims = resp.first_dims[e.name]
        counts = [d * row for d in dims]
        recv = ad.empty(sum(counts), e.dtype, e.device)
        backend.allgather(ad.flat(e.tensor), recv, counts, comm)
        e.meta["out_shape"] = (sum(dims),) + tuple(e.shape[1:])
        self.complete(e, ad.result(e, recv))

    def _broadcast(self, resp, entries, comm, backend, rec):
        e = entries[0]
        buf = self._output_flat(e, copy_input=comm.rank == resp.root)
        backend.broadcast(buf, resp.root, comm)
        self.complete(e, e.adapter.result(e, buf))

    def _alltoall(self, resp, entries, comm, backend, rec):
        e = entries[0]
        ad = e.adapter
        row = e.meta["row_numel"]
        matrix = resp.splits[e.name]          # matrix[src][dst] = rows src sends to dst
        send_counts = [s * row for s in matrix[comm.rank]]
        recv_rows = [matrix[src][comm.rank] for src in range(comm.size)]
        recv = ad.empty(sum(recv_rows) * row, e.dtype, e.device)
        backend.alltoall(ad.flat(e.tensor), send_counts, recv, [r * row for r in recv_rows], comm)
        e.meta["out_shape"] = (sum(recv_rows),) + tuple(e.shape[1:])
        e.meta["received_splits"] = recv_rows
        self.complete(e, ad.result(e, recv))

    def _reducescatter(self, resp, entries, comm, backend, rec):
        e = entries[0]
        ad = e.adapter
        op = ReduceOp(resp.reduce_op)
        rows = split_rows(e.shape[0], comm.size)
        row = e.meta["row_numel"]
        send = ad.empty(e.meta["numel"], e.dtype, e.device)   # scaled in place: never the input
        ad.copy_(send, 0, ad.flat(e.tensor))
        ad.scale_(send, resp.prescale)
        recv = ad.empty(rows[comm.rank] * row, e.dtype, e.device)
        backend.reducescatter(send, recv, [r * row for r in rows], backend_op(op), comm)
        if op is ReduceOp.Average:
            ad.average_(recv, comm.size)
        ad.scale_(recv, resp.postscale)
        e.meta["out_shape"] = (rows[comm.rank],) + tuple(e.shape[1:])
        self.complete(e, ad.result(e, recv))

    def _barrier(self, resp, entries, comm, backend, rec):
        backend.barrier(comm)
        for e in entries:
            self.complete(e, None)


def _same_memory(ad, a, b) -> bool:
    same = getattr(ad, "same_memory", None)
    return bool(same(a, b)) if same is not None else False


def split_rows(n: int, parts: int) -> list[int]:
    """Rows per rank for reducescatter: as even as possible, the first ranks get the extra rows."""
    q, r = divmod(n, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]
