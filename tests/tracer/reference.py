"""The reference formatter: what each recorder call must write, in plain Python (the tests compare
the C formatter's text with it line by line; it is no runtime path)."""
from __future__ import annotations

import json

from tracer import vocab as v


def jv(x) -> str:
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def _head(name, cat, ph, pid, tid) -> str:
    return f'{{"name":{jv(name)},"cat":{jv(cat)},"ph":"{ph}","pid":{pid},"tid":{tid},"ts":'


def _args(args, extra, step) -> str:
    a = dict(args or {})
    a.update(extra or {})
    a.setdefault(v.ARG_STEP, step)
    return jv(a)


def x_line(pid, tid, name, cat, t0, t1, step, args=None, extra=None) -> str:
    return (f'{_head(name, cat, "X", pid, tid)}{t0}e-3,"dur":{t1 - t0}e-3,'
            f'"args":{_args(args, extra, step)}}}')


def i_line(pid, tid, name, cat, t, step, args=None) -> str:
    return f'{_head(name, cat, "i", pid, tid)}{t}e-3,"s":"t","args":{_args(args, None, step)}}}'


def c_line(pid, name, t, value) -> str:
    return f'{_head(name, v.CAT_COUNTER, "C", pid, 0)}{t}e-3,"args":{{"value":{jv(value)}}}}}'


def ready_line(pid, names, rank, process_set, t, step) -> str:
    return (f'{_head(v.READY, v.CAT_NEGOTIATION, "i", pid, v.TID_NEGOTIATION)}{t}e-3,"s":"t",'
            f'"args":{{"rank":{rank},"step":{step},"process_set":{process_set},'
            f'"tensors":{jv(list(names))}}}}}')


def thread_lines(pid, tid, name) -> list[str]:
    return [f'{{"name":"thread_name","ph":"M","pid":{pid},"tid":{tid},'
            f'"args":{{"name":{jv(name)}}}}}',
            f'{{"name":"thread_sort_index","ph":"M","pid":{pid},"tid":{tid},'
            f'"args":{{"sort_index":{tid}}}}}']


def op_line(pid, tid, key, ph, t0, t1, step, error=None) -> str:
    name = key[0]
    tail = "" if error is None else f',"error":{jv(error)}'
    if ph == "E":
        return f'{_head(name, v.CAT_TENSOR, "E", pid, tid)}{t1}e-3,"args":{{"step":{step}{tail}}}}}'
    args = jv(dict(zip((v.ARG_OP, v.ARG_BYTES, v.ARG_DTYPE, v.ARG_SHAPE, v.ARG_REDUCE_OP,
                        v.ARG_PROCESS_SET, v.ARG_PRIORITY), key[1:])))[:-1]
    if ph == "B":
        return f'{_head(name, v.CAT_TENSOR, "B", pid, tid)}{t0}e-3,"args":{args},"step":{step}}}}}'
    return (f'{_head(name, v.CAT_TENSOR, "X", pid, tid)}{t0}e-3,"dur":{t1 - t0}e-3,'
            f'"args":{args},"step":{step}{tail}}}}}')
