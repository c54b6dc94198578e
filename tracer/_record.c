/* tracer._record: the recorder's hot path and the writer's formatter.
 *
 * Recording threads append fixed-size records (kind, tid, times, step and references to a name, a
 * category and one small immutable object: an args dict, an op's trace_key, a list of names) to a
 * preallocated array, under the GIL and without running Python code. The writer thread swaps the
 * array for its spare (one pointer swap, still under the GIL) and formats the records it took into
 * one chunk of JSON lines: only the writer touches text, so no line can interleave with another.
 * Public C API only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"
#include <time.h>
#include "record_api.h"

static inline long long now_ns(void) {   /* time.perf_counter_ns() on Linux */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- records ---------------------------------------------------------------------------------- */
enum { K_X, K_I, K_C, K_READY, K_OP };

typedef struct {
    int kind, tid;          /* K_READY: tid = process set */
    PyObject *name, *cat;   /* strong references (NULL when unused) */
    PyObject *obj, *extra;  /* X: args, end args; I: args; C: value; READY: names; OP: trace_key, error */
    long long t0, t1, step; /* K_READY: t1 = rank */
} Rec;

typedef struct {
    Rec *r;
    Py_ssize_t n, alloc;
} Recs;

typedef struct {
    PyObject_HEAD
    char enabled, closed, draining, py_spans;   /* py_spans: span/begin/end are Python (NVTX) */
    long long step, base, dropped;
    Py_ssize_t cap;
    Recs live, spare;
} Core;

static PyTypeObject CoreType, SpanType;
static PyObject *s_stamp, *s_trace_key, *s_submit_ns, *s_step, *s_end, *s_enabled;

static void rec_clear(Rec *r) {
    Py_XDECREF(r->name);
    Py_XDECREF(r->cat);
    Py_XDECREF(r->obj);
    Py_XDECREF(r->extra);
}

/* A slot for one more record, or NULL when the buffer is full (the event is counted as dropped). */
static Rec *slot(Core *c) {
    Recs *q = &c->live;
    if (q->n >= q->alloc) {
        if (q->n >= c->cap) {
            c->dropped++;
            return NULL;
        }
        Py_ssize_t a = q->alloc ? q->alloc * 2 : 1024;
        if (a > c->cap) a = c->cap;
        Rec *p = PyMem_Realloc(q->r, a * sizeof(Rec));
        if (!p) {
            c->dropped++;
            return NULL;
        }
        q->r = p;
        q->alloc = a;
    }
    Rec *r = &q->r[q->n++];
    memset(r, 0, sizeof(Rec));
    return r;
}

static int put_rec(Core *c, int kind, int tid, PyObject *name, PyObject *cat, PyObject *obj,
                   PyObject *extra, long long t0, long long t1, long long step) {
    Rec *r = slot(c);
    if (!r) return 0;
    r->kind = kind;
    r->tid = tid;
    r->name = Py_XNewRef(name);
    r->cat = Py_XNewRef(cat);
    r->obj = (obj == Py_None) ? NULL : Py_XNewRef(obj);
    r->extra = (extra == Py_None) ? NULL : Py_XNewRef(extra);
    r->t0 = t0;
    r->t1 = t1;
    r->step = step;
    return 1;
}

static int as_ns(PyObject *o, long long *out) {   /* None: now */
    if (!o || o == Py_None) {
        *out = now_ns();
        return 0;
    }
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int as_tid(PyObject *o, int *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int)v;
    return 0;
}

/* ---- Core: the recording calls --------------------------------------------------------------- */
static int core_init(Core *c, PyObject *args, PyObject *kw) {
    Py_ssize_t cap = 262144;
    static char *kws[] = {"cap", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|n", kws, &cap)) return -1;
    c->cap = cap > 0 ? cap : 1;
    c->base = now_ns();
    c->enabled = 1;
    c->step = -1;
    return 0;
}

static void recs_free(Recs *q) {
    for (Py_ssize_t i = 0; i < q->n; i++) rec_clear(&q->r[i]);
    PyMem_Free(q->r);
    q->r = NULL;
    q->n = q->alloc = 0;
}

static int core_traverse(Core *c, visitproc visit, void *arg) {
    Recs *qs[] = {&c->live, &c->spare};
    for (int k = 0; k < 2; k++)
        for (Py_ssize_t i = 0; i < qs[k]->n; i++) {
            Py_VISIT(qs[k]->r[i].obj);
            Py_VISIT(qs[k]->r[i].extra);
        }
    return 0;
}

static int core_clear(Core *c) {
    recs_free(&c->live);
    recs_free(&c->spare);
    return 0;
}

static void core_dealloc(Core *c) {
    PyObject_GC_UnTrack(c);
    core_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *core_now(Core *c, PyObject *Py_UNUSED(a)) { return PyLong_FromLongLong(now_ns()); }

/* A span: open from begin()/__enter__ to end()/__exit__; also the token of begin/end. Not tracked
 * by the collector (it references its recorder, names and args; nothing references it back), so
 * the spans of a step add nothing to the collector's counts. */
typedef struct {
    PyObject_HEAD
    Core *core;
    PyObject *name, *cat, *args;
    int tid, open;
    long long t0, step;
} Span;

static PyObject *span_new(Core *c, PyObject *tid, PyObject *name, PyObject *cat, PyObject *args,
                          PyObject *ts) {
    Span *s = PyObject_New(Span, &SpanType);
    if (!s) return NULL;
    s->core = (Core *)Py_NewRef(c);
    s->name = Py_NewRef(name);
    s->cat = Py_NewRef(cat);
    s->args = Py_XNewRef(args);
    s->open = 0;
    s->step = c->step;
    s->t0 = 0;
    if (as_tid(tid, &s->tid) < 0 || (ts && as_ns(ts, &s->t0) < 0)) {
        Py_DECREF(s);
        return NULL;
    }
    s->open = ts != NULL;
    return (PyObject *)s;
}

static void span_dealloc(Span *s) {
    Py_XDECREF(s->core);
    Py_XDECREF(s->name);
    Py_XDECREF(s->cat);
    Py_XDECREF(s->args);
    PyObject_Free(s);
}

static void span_close(Span *s, PyObject *end_args) {
    if (!s->open) return;
    s->open = 0;
    Core *c = s->core;
    if (!c->closed)
        put_rec(c, K_X, s->tid, s->name, s->cat, s->args, end_args, s->t0, now_ns(), s->step);
}

static PyObject *span_enter(Span *s, PyObject *Py_UNUSED(a)) {
    s->t0 = now_ns();
    s->step = s->core->step;
    s->open = 1;
    return Py_NewRef(s);
}

static PyObject *span_exit(Span *s, PyObject *const *a, Py_ssize_t n) {
    span_close(s, NULL);
    Py_RETURN_FALSE;
}

static PyMethodDef span_methods[] = {
    {"__enter__", (PyCFunction)span_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))span_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SpanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._record.Span",
    .tp_basicsize = sizeof(Span),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "an X span of a recorder: a context manager, and the token of begin/end",
    .tp_dealloc = (destructor)span_dealloc,
    .tp_methods = span_methods,
};

static PyObject *idle;   /* what span() gives when not enabled: a shared no-op context manager */

/* span(tid, name, cat, args=None) */
static PyObject *core_span(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"tid", "name", "cat", "args", NULL};
    PyObject *tid, *name, *cat, *a = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O:span", kws, &tid, &name, &cat, &a))
        return NULL;
    if (!c->enabled || c->closed) return Py_NewRef(idle);
    return span_new(c, tid, name, cat, a, NULL);
}

/* begin(tid, name, cat, args=None, ts_ns=None) -> token (None when not enabled) */
static PyObject *core_begin(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"tid", "name", "cat", "args", "ts_ns", NULL};
    PyObject *tid, *name, *cat, *a = Py_None, *ts = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OO:begin", kws, &tid, &name, &cat, &a, &ts))
        return NULL;
    if (!c->enabled || c->closed) Py_RETURN_NONE;
    return span_new(c, tid, name, cat, a, ts);
}

/* end(token, args=None) */
static PyObject *core_end(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"token", "args", NULL};
    PyObject *tok, *a = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:end", kws, &tok, &a)) return NULL;
    if (Py_IS_TYPE(tok, &SpanType)) span_close((Span *)tok, a);
    Py_RETURN_NONE;
}

/* complete(tid, name, cat, t0_ns, t1_ns, args=None) */
static PyObject *core_complete(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"tid", "name", "cat", "t0_ns", "t1_ns", "args", NULL};
    PyObject *tid, *name, *cat, *a = Py_None;
    long long t0, t1;
    int t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOLL|O:complete", kws, &tid, &name, &cat, &t0,
                                     &t1, &a))
        return NULL;
    if (c->enabled && !c->closed) {
        if (as_tid(tid, &t) < 0) return NULL;
        put_rec(c, K_X, t, name, cat, a, NULL, t0, t1, c->step);
    }
    Py_RETURN_NONE;
}

/* instant(tid, name, cat, args=None, ts_ns=None) */
static PyObject *core_instant(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"tid", "name", "cat", "args", "ts_ns", NULL};
    PyObject *tid, *name, *cat, *a = Py_None, *ts = Py_None;
    long long t;
    int id;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OO:instant", kws, &tid, &name, &cat, &a, &ts))
        return NULL;
    if (c->enabled && !c->closed) {
        if (as_tid(tid, &id) < 0 || as_ns(ts, &t) < 0) return NULL;
        put_rec(c, K_I, id, name, cat, a, NULL, t, 0, c->step);
    }
    Py_RETURN_NONE;
}

/* counter(name, value, ts_ns=None) */
static PyObject *core_counter(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"name", "value", "ts_ns", NULL};
    PyObject *name, *value, *ts = Py_None;
    long long t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:counter", kws, &name, &value, &ts))
        return NULL;
    if (c->enabled && !c->closed) {
        if (as_ns(ts, &t) < 0) return NULL;
        put_rec(c, K_C, 0, name, NULL, value, NULL, t, 0, c->step);
    }
    Py_RETURN_NONE;
}

/* ready(names, rank, process_set, ts_ns): one READY instant (names: a list, kept as given) */
static PyObject *core_ready(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"names", "rank", "process_set", "ts_ns", NULL};
    PyObject *names, *ts = Py_None;
    long long rank, t;
    int ps;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OLi|O:ready", kws, &names, &rank, &ps, &ts))
        return NULL;
    if (c->enabled && !c->closed) {
        if (as_ns(ts, &t) < 0) return NULL;
        put_rec(c, K_READY, ps, NULL, NULL, names, NULL, t, rank, c->step);
    }
    Py_RETURN_NONE;
}

/* Per op stamped by ``c``: one record holding its trace_key, submit_ns, step and error. Returns a
 * new reference to the ops another recorder stamped (a list, or None), NULL on error. */
static PyObject *ops_done(Core *c, PyObject *ops, long long t, PyObject *error) {
    PyObject *others = NULL;
    PyObject *seq = PySequence_Fast(ops, "ops must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *st = PyObject_GetAttr(op, s_stamp);
        if (!st) goto fail;
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != 2) {   /* not stamped: not recorded */
            Py_DECREF(st);
            continue;
        }
        if (PyTuple_GET_ITEM(st, 0) != (PyObject *)c) {
            Py_DECREF(st);
            if (!others && !(others = PyList_New(0))) goto fail;
            if (PyList_Append(others, op) < 0) goto fail;
            continue;
        }
        long long step = PyLong_AsLongLong(PyTuple_GET_ITEM(st, 1));
        Py_DECREF(st);
        if (step == -1 && PyErr_Occurred()) goto fail;
        if (c->closed) continue;
        PyObject *key = PyObject_GetAttr(op, s_trace_key);
        PyObject *sub = key ? PyObject_GetAttr(op, s_submit_ns) : NULL;
        long long t0 = sub ? PyLong_AsLongLong(sub) : -1;
        Py_XDECREF(sub);
        if (!key || (t0 == -1 && PyErr_Occurred())) {
            Py_XDECREF(key);
            goto fail;
        }
        if (PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 8)
            put_rec(c, K_OP, 0, NULL, NULL, key, error, t0, t, step);
        else
            c->dropped++;   /* not the contract's key: counted, like a full buffer's events */
        Py_DECREF(key);
    }
    Py_DECREF(seq);
    return others ? others : Py_NewRef(Py_None);
fail:
    Py_DECREF(seq);
    Py_XDECREF(others);
    return NULL;
}

/* ops_done(ops, t_done_ns, error=None) -> the ops another recorder stamped (None if none). */
static PyObject *core_ops_done(Core *c, PyObject *args, PyObject *kw) {
    static char *kws[] = {"ops", "t_done_ns", "error", NULL};
    PyObject *ops, *error = Py_None;
    long long t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OL|O:ops_done", kws, &ops, &t, &error))
        return NULL;
    return ops_done(c, ops, t, error);
}

static PyObject *core_events_dropped(Core *c, PyObject *Py_UNUSED(a)) {
    return PyLong_FromLongLong(c->dropped);
}

static PyObject *core_stop(Core *c, PyObject *Py_UNUSED(a)) {   /* no record accepted from now on */
    c->closed = 1;
    c->enabled = 0;
    Py_RETURN_NONE;
}

/* ---- formatting (the writer's thread) --------------------------------------------------------- */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t need) {
    if (b->len + need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + need) cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define LIT(b, s) put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static int put_ll(Buf *b, long long v) {
    char tmp[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--i] = '-';
    return put(b, tmp + i, 24 - i);
}

static int put_str(Buf *b, PyObject *s) {   /* a JSON string literal (UTF-8 as is) */
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return -1;
    if (grow(b, n + 2) < 0 || LIT(b, "\"")) return -1;
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)u[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        if (put(b, u + start, i - start)) return -1;
        start = i + 1;
        char esc[8];
        int k;
        switch (ch) {
        case '"': k = snprintf(esc, sizeof esc, "\\\""); break;
        case '\\': k = snprintf(esc, sizeof esc, "\\\\"); break;
        case '\n': k = snprintf(esc, sizeof esc, "\\n"); break;
        case '\r': k = snprintf(esc, sizeof esc, "\\r"); break;
        case '\t': k = snprintf(esc, sizeof esc, "\\t"); break;
        case '\b': k = snprintf(esc, sizeof esc, "\\b"); break;
        case '\f': k = snprintf(esc, sizeof esc, "\\f"); break;
        default: k = snprintf(esc, sizeof esc, "\\u%04x", ch);
        }
        if (put(b, esc, k)) return -1;
    }
    return (put(b, u + start, n - start) || LIT(b, "\"")) ? -1 : 0;
}

typedef struct {
    PyObject_HEAD
    long long pid;
    PyObject *dumps;   /* obj -> bytes (orjson): values the formatter does not write itself */
    PyObject *tids;    /* tensor name -> its thread (never cleared: ids stay stable) */
    PyObject *named;   /* names whose thread this file part names already */
    PyObject *begun;   /* names whose B line is written and whose end is not */
    PyObject *texts;   /* trace_key -> its args text (bytes), per file part */
    PyObject *cat_tensor, *cat_counter, *ready, *cat_negotiation;   /* tracer.vocab's */
    long long tid_negotiation, tid_base;
} Fmt;

static int put_json(Buf *b, PyObject *o, Fmt *f);

static int put_dumps(Buf *b, PyObject *o, Fmt *f) {
    PyObject *j = PyObject_CallOneArg(f->dumps, o);
    if (!j) {   /* not serialisable (e.g. an int past 64 bits): its str() */
        PyErr_Clear();
        PyObject *s = PyObject_Str(o);
        int r = s ? put_str(b, s) : -1;
        Py_XDECREF(s);
        return r;
    }
    char *p;
    Py_ssize_t n;
    int r = PyBytes_AsStringAndSize(j, &p, &n) ? -1 : put(b, p, n);
    Py_DECREF(j);
    return r;
}

/* a dict's members (str keys) without braces */
static int put_members(Buf *b, PyObject *d, Fmt *f, int *first) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if ((!*first && LIT(b, ",")) || put_str(b, k) || LIT(b, ":") || put_json(b, v, f))
            return -1;
        *first = 0;
    }
    return 0;
}

/* ``d`` itself when its keys are all str, else a copy keyed by their str() (a new reference) */
static PyObject *str_keyed(PyObject *d) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    int plain = 1;
    while (plain && PyDict_Next(d, &pos, &k, &v)) plain = PyUnicode_CheckExact(k);
    if (plain) return Py_NewRef(d);
    PyObject *out = PyDict_New();
    for (pos = 0; out && PyDict_Next(d, &pos, &k, &v);) {
        PyObject *sk = PyUnicode_CheckExact(k) ? Py_NewRef(k) : PyObject_Str(k);
        if (!sk || PyDict_SetItem(out, sk, v) < 0) Py_CLEAR(out);
        Py_XDECREF(sk);
    }
    return out;
}

static int put_json(Buf *b, PyObject *o, Fmt *f) {
    if (PyUnicode_CheckExact(o)) return put_str(b, o);
    if (PyLong_CheckExact(o)) {
        int of = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &of);
        if (!of && !(v == -1 && PyErr_Occurred())) return put_ll(b, v);
        PyErr_Clear();
        return put_dumps(b, o, f);
    }
    if (o == Py_None) return LIT(b, "null");
    if (o == Py_True) return LIT(b, "true");
    if (o == Py_False) return LIT(b, "false");
    if (PyFloat_CheckExact(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        if (!isfinite(d)) return LIT(b, "null");
        char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!s) return -1;
        int r = put(b, s, (Py_ssize_t)strlen(s));
        PyMem_Free(s);
        return r;
    }
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        PyObject *seq = PySequence_Fast(o, "");
        if (!seq) return -1;
        int r = LIT(b, "[");
        for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); !r && i < n; i++)
            r = (i && LIT(b, ",")) || put_json(b, PySequence_Fast_GET_ITEM(seq, i), f);
        Py_DECREF(seq);
        return r || LIT(b, "]") ? -1 : 0;
    }
    if (PyDict_Check(o)) {
        PyObject *d = str_keyed(o);
        int first = 1;
        int r = !d || LIT(b, "{") || put_members(b, d, f, &first) || LIT(b, "}");
        Py_XDECREF(d);
        return r ? -1 : 0;
    }
    return put_dumps(b, o, f);
}

/* An event's args: ``args`` updated with ``extra`` (dicts, or NULL), then the step unless set. */
static int put_args(Buf *b, PyObject *args, PyObject *extra, long long step, Fmt *f) {
    PyObject *merged = NULL;
    if (args && !PyDict_Check(args)) args = NULL;
    if (extra && !PyDict_Check(extra)) extra = NULL;
    if (args && extra) {
        if (!(merged = PyDict_Copy(args)) || PyDict_Update(merged, extra) < 0) {
            Py_XDECREF(merged);
            return -1;
        }
        args = merged;
    } else if (!args) {
        args = extra;
    }
    if (args) {
        PyObject *d = str_keyed(args);
        Py_XDECREF(merged);
        if (!d) return -1;
        args = merged = d;
    }
    int first = 1, r = LIT(b, "{");
    if (!r && args) r = put_members(b, args, f, &first);
    int has = args ? PyDict_Contains(args, s_step) : 0;
    if (has < 0) r = -1;
    if (!r && !has) r = (!first && LIT(b, ",")) || LIT(b, "\"step\":") || put_ll(b, step);
    Py_XDECREF(merged);
    return r || LIT(b, "}") ? -1 : 0;
}

static int head(Buf *b, Fmt *f, PyObject *name, PyObject *cat, const char *ph, long long tid) {
    return LIT(b, "{\"name\":") || put_str(b, name) || LIT(b, ",\"cat\":") || put_str(b, cat) ||
           LIT(b, ",\"ph\":\"") || put(b, ph, (Py_ssize_t)strlen(ph)) || LIT(b, "\",\"pid\":") ||
           put_ll(b, f->pid) || LIT(b, ",\"tid\":") || put_ll(b, tid) || LIT(b, ",\"ts\":");
}

static int put_time(Buf *b, long long t) { return put_ll(b, t) || LIT(b, "e-3"); }

/* A line begins: its separator when it is not the first of the chunk. */
static int sep(Buf *b, long long *lines) {
    if ((*lines)++ && LIT(b, ",\n")) return -1;
    return 0;
}


/* The thread of tensor ``name``: made on first use, named in this part when it is not yet. */
static long long tensor_tid(Buf *b, Fmt *f, PyObject *name, long long *lines) {
    PyObject *t = PyDict_GetItemWithError(f->tids, name);
    long long tid;
    if (t) {
        tid = PyLong_AsLongLong(t);
    } else {
        if (PyErr_Occurred()) return -1;
        tid = f->tid_base + PyDict_GET_SIZE(f->tids);
        PyObject *v = PyLong_FromLongLong(tid);
        if (!v || PyDict_SetItem(f->tids, name, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    int named = PySet_Contains(f->named, name);
    if (named < 0) return -1;
    if (!named) {
        if (PySet_Add(f->named, name) < 0) return -1;
        if (sep(b, lines) || LIT(b, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":") ||
            put_ll(b, f->pid) || LIT(b, ",\"tid\":") || put_ll(b, tid) ||
            LIT(b, ",\"args\":{\"name\":") || put_str(b, name) || LIT(b, "}}") || sep(b, lines) ||
            LIT(b, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":") || put_ll(b, f->pid) ||
            LIT(b, ",\"tid\":") || put_ll(b, tid) || LIT(b, ",\"args\":{\"sort_index\":") ||
            put_ll(b, tid) || LIT(b, "}}"))
            return -1;
    }
    return tid;
}

/* The args text of an op, from its trace_key (name, op, bytes, dtype, shape, reduce_op,
 * process_set, priority), cached per key: "op":..,"bytes":..,...,"priority":P */
static PyObject *op_text(Fmt *f, PyObject *key) {
    PyObject *t = PyDict_GetItemWithError(f->texts, key);
    if (t) return Py_NewRef(t);
    if (PyErr_Occurred()) return NULL;
    static const char *keys[] = {"\"op\":", ",\"bytes\":", ",\"dtype\":", ",\"shape\":",
                                 ",\"reduce_op\":", ",\"process_set\":", ",\"priority\":"};
    Buf b = {0};
    int r = 0;
    for (int i = 0; !r && i < 7; i++)
        r = put(&b, keys[i], (Py_ssize_t)strlen(keys[i])) || put_json(&b, PyTuple_GET_ITEM(key, i + 1), f);
    t = r ? NULL : PyBytes_FromStringAndSize(b.p, b.len);
    PyMem_Free(b.p);
    if (t && PyDict_GET_SIZE(f->texts) > 65536) PyDict_Clear(f->texts);
    if (t && PyDict_SetItem(f->texts, key, t) < 0) Py_CLEAR(t);
    return t;
}

static int put_bytes(Buf *b, PyObject *bytes) {
    return put(b, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

static int put_error(Buf *b, PyObject *error, Fmt *f) {
    if (!error) return 0;
    return LIT(b, ",\"error\":") || put_json(b, error, f);
}

/* One op's line: ph 'X' (its whole slice), 'B' (in flight) or 'E' (its end after a B). */
static int put_op(Buf *b, Fmt *f, PyObject *key, char ph, long long t0, long long t1,
                  long long step, PyObject *error, long long base, long long *lines) {
    PyObject *name = PyTuple_GET_ITEM(key, 0);
    if (!PyUnicode_Check(name)) return 0;
    long long tid = tensor_tid(b, f, name, lines);
    if (tid < 0) return -1;
    char phs[2] = {ph, 0};
    if (sep(b, lines) || head(b, f, name, f->cat_tensor, phs, tid)) return -1;
    if (ph == 'E')
        return (put_time(b, t1 - base) || LIT(b, ",\"args\":{\"step\":") || put_ll(b, step) ||
                put_error(b, error, f) || LIT(b, "}}")) ? -1 : 0;
    PyObject *text = op_text(f, key);
    if (!text) return -1;
    int r = put_time(b, t0 - base) ||
            (ph == 'X' && (LIT(b, ",\"dur\":") || put_time(b, t1 - t0))) ||
            LIT(b, ",\"args\":{") || put_bytes(b, text) || LIT(b, ",\"step\":") ||
            put_ll(b, step) || (ph == 'X' && put_error(b, error, f)) || LIT(b, "}}");
    Py_DECREF(text);
    return r ? -1 : 0;
}

static int put_one(Buf *b, Fmt *f, Rec *r, long long base, long long *lines) {
    switch (r->kind) {
    case K_X:
        return sep(b, lines) || head(b, f, r->name, r->cat, "X", r->tid) ||
               put_time(b, r->t0 - base) || LIT(b, ",\"dur\":") || put_time(b, r->t1 - r->t0) ||
               LIT(b, ",\"args\":") || put_args(b, r->obj, r->extra, r->step, f) || LIT(b, "}");
    case K_I:
        return sep(b, lines) || head(b, f, r->name, r->cat, "i", r->tid) ||
               put_time(b, r->t0 - base) || LIT(b, ",\"s\":\"t\",\"args\":") ||
               put_args(b, r->obj, NULL, r->step, f) || LIT(b, "}");
    case K_C:
        return sep(b, lines) || head(b, f, r->name, f->cat_counter, "C", 0) ||
               put_time(b, r->t0 - base) || LIT(b, ",\"args\":{\"value\":") ||
               put_json(b, r->obj ? r->obj : Py_None, f) || LIT(b, "}}");
    case K_READY:
        return sep(b, lines) || head(b, f, f->ready, f->cat_negotiation, "i", f->tid_negotiation) ||
               put_time(b, r->t0 - base) || LIT(b, ",\"s\":\"t\",\"args\":{\"rank\":") ||
               put_ll(b, r->t1) || LIT(b, ",\"step\":") || put_ll(b, r->step) ||
               LIT(b, ",\"process_set\":") || put_ll(b, r->tid) || LIT(b, ",\"tensors\":") ||
               put_json(b, r->obj ? r->obj : Py_None, f) || LIT(b, "}}");
    case K_OP: {
        PyObject *name = PyTuple_GET_ITEM(r->obj, 0);
        int begun = PySet_Discard(f->begun, name);
        if (begun < 0) return -1;
        return put_op(b, f, r->obj, begun ? 'E' : 'X', r->t0, r->t1, r->step, r->extra, base,
                      lines);
    }
    }
    return 0;
}

static PyObject *chunk(Buf *b, long long lines, int ok) {
    PyObject *res = ok ? Py_BuildValue("(y#L)", b->p ? b->p : "", b->len, lines) : NULL;
    PyMem_Free(b->p);
    return res;
}

/* Fmt.take(core) -> (bytes, lines): the records buffered so far, formatted; the buffer is empty
 * after (records appended meanwhile wait for the next call). */
static PyObject *fmt_take(Fmt *f, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &CoreType)) return PyErr_Format(PyExc_TypeError, "a Core");
    Core *c = (Core *)arg;
    if (c->draining) return Py_BuildValue("(y#i)", "", (Py_ssize_t)0, 0);
    Recs took = c->live;   /* the swap: nothing below runs before it, under the GIL */
    c->live = c->spare;
    c->spare.r = NULL;
    c->spare.n = c->spare.alloc = 0;
    c->draining = 1;
    Buf b = {0};
    long long lines = 0;
    int ok = 1;
    for (Py_ssize_t i = 0; i < took.n; i++) {
        Py_ssize_t mark = b.len;
        long long had = lines;
        if (ok && put_one(&b, f, &took.r[i], c->base, &lines) < 0) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError)) ok = 0;
            PyErr_Clear();   /* a record that cannot be written is counted as dropped */
            b.len = mark;
            lines = had;
            c->dropped++;
        }
        rec_clear(&took.r[i]);
    }
    took.n = 0;
    if (!c->spare.r) c->spare = took;   /* kept for the next swap */
    else PyMem_Free(took.r);
    c->draining = 0;
    return chunk(&b, lines, ok);
}

/* Fmt.begins(core, ops) -> (bytes, lines): the B lines of ``ops`` (in flight) that ``core``
 * stamped and whose B is not written yet. */
static PyObject *fmt_begins(Fmt *f, PyObject *args) {
    PyObject *core, *ops;
    if (!PyArg_ParseTuple(args, "O!O", &CoreType, &core, &ops)) return NULL;
    PyObject *seq = PySequence_Fast(ops, "ops must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    long long lines = 0;
    int ok = 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); ok && i < n; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *st = PyObject_GetAttr(op, s_stamp);
        if (!st) { ok = 0; break; }
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != 2 || PyTuple_GET_ITEM(st, 0) != core) {
            Py_DECREF(st);
            continue;
        }
        long long step = PyLong_AsLongLong(PyTuple_GET_ITEM(st, 1));
        Py_DECREF(st);
        PyObject *key = PyObject_GetAttr(op, s_trace_key);
        PyObject *sub = key ? PyObject_GetAttr(op, s_submit_ns) : NULL;
        long long t0 = sub ? PyLong_AsLongLong(sub) : -1;
        Py_XDECREF(sub);
        if (!key || PyErr_Occurred()) { Py_XDECREF(key); ok = 0; break; }
        if (PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 8) {
            PyObject *name = PyTuple_GET_ITEM(key, 0);
            int had = PySet_Contains(f->begun, name);
            if (had < 0 || (!had && (PySet_Add(f->begun, name) < 0 ||
                                      put_op(&b, f, key, 'B', t0, 0, step, NULL,
                                             ((Core *)core)->base, &lines) < 0)))
                ok = 0;
        }
        Py_DECREF(key);
    }
    Py_DECREF(seq);
    return chunk(&b, lines, ok);
}

/* Fmt.threads(names) -> (bytes, lines): the metadata lines naming the threads of ``names`` that
 * this file part does not name yet (a new part starts with those its first lines use). */
static PyObject *fmt_threads(Fmt *f, PyObject *names) {
    PyObject *seq = PySequence_Fast(names, "names must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    long long lines = 0;
    int ok = 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); ok && i < n; i++)
        ok = tensor_tid(&b, f, PySequence_Fast_GET_ITEM(seq, i), &lines) >= 0;
    Py_DECREF(seq);
    return chunk(&b, lines, ok);
}

/* Fmt.instant(name, cat, tid, t_rel, args, scope) / Fmt.counter(name, t_rel, value) -> bytes:
 * the writer's own lines (SHUTDOWN, CAP_REACHED, events_dropped). */
static PyObject *fmt_instant(Fmt *f, PyObject *args) {
    PyObject *name, *cat, *a;
    long long tid, t;
    const char *scope;
    if (!PyArg_ParseTuple(args, "UULLOs", &name, &cat, &tid, &t, &a, &scope)) return NULL;
    Buf b = {0};
    int r = head(&b, f, name, cat, "i", tid) || put_time(&b, t) || LIT(&b, ",\"s\":\"") ||
            put(&b, scope, (Py_ssize_t)strlen(scope)) || LIT(&b, "\",\"args\":") ||
            put_json(&b, a, f) || LIT(&b, "}");
    PyObject *out = r ? NULL : PyBytes_FromStringAndSize(b.p, b.len);
    PyMem_Free(b.p);
    return out;
}

static PyObject *fmt_counter(Fmt *f, PyObject *args) {
    PyObject *name, *value;
    long long t;
    if (!PyArg_ParseTuple(args, "ULO", &name, &t, &value)) return NULL;
    Buf b = {0};
    long long lines = 0;
    Rec r = {.kind = K_C, .name = name, .obj = value, .t0 = t};
    int bad = put_one(&b, f, &r, 0, &lines);
    PyObject *out = bad ? NULL : PyBytes_FromStringAndSize(b.p, b.len);
    PyMem_Free(b.p);
    return out;
}

static int fmt_init(Fmt *f, PyObject *args, PyObject *kw) {
    long long pid;
    PyObject *dumps, *ct, *cc, *rd, *cn;
    if (!PyArg_ParseTuple(args, "LO(UUUULL):Formatter", &pid, &dumps, &ct, &cc, &rd, &cn,
                          &f->tid_negotiation, &f->tid_base))
        return -1;
    f->pid = pid;
    Py_XSETREF(f->dumps, Py_NewRef(dumps));
    Py_XSETREF(f->cat_tensor, Py_NewRef(ct));
    Py_XSETREF(f->cat_counter, Py_NewRef(cc));
    Py_XSETREF(f->ready, Py_NewRef(rd));
    Py_XSETREF(f->cat_negotiation, Py_NewRef(cn));
    Py_XSETREF(f->tids, PyDict_New());
    Py_XSETREF(f->named, PySet_New(NULL));
    Py_XSETREF(f->begun, PySet_New(NULL));
    Py_XSETREF(f->texts, PyDict_New());
    return (f->tids && f->named && f->begun && f->texts) ? 0 : -1;
}

static int fmt_traverse(Fmt *f, visitproc visit, void *arg) {
    Py_VISIT(f->dumps);
    Py_VISIT(f->tids);
    Py_VISIT(f->named);
    Py_VISIT(f->begun);
    Py_VISIT(f->texts);
    return 0;
}

static int fmt_clear(Fmt *f) {
    Py_CLEAR(f->dumps);
    Py_CLEAR(f->tids);
    Py_CLEAR(f->named);
    Py_CLEAR(f->begun);
    Py_CLEAR(f->texts);
    Py_CLEAR(f->cat_tensor);
    Py_CLEAR(f->cat_counter);
    Py_CLEAR(f->ready);
    Py_CLEAR(f->cat_negotiation);
    return 0;
}

static void fmt_dealloc(Fmt *f) {
    PyObject_GC_UnTrack(f);
    fmt_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyMethodDef fmt_methods[] = {
    {"take", (PyCFunction)fmt_take, METH_O,
     "take(core) -> (bytes, lines): the records buffered so far as event lines joined by ',\\n'"},
    {"begins", (PyCFunction)fmt_begins, METH_VARARGS,
     "begins(core, ops) -> (bytes, lines): B lines of in-flight ops core stamped, not yet begun"},
    {"threads", (PyCFunction)fmt_threads, METH_O,
     "threads(names) -> (bytes, lines): metadata lines naming those threads this part lacks"},
    {"instant", (PyCFunction)fmt_instant, METH_VARARGS,
     "instant(name, cat, tid, t_rel_ns, args, scope) -> bytes"},
    {"counter", (PyCFunction)fmt_counter, METH_VARARGS, "counter(name, t_rel_ns, value) -> bytes"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef fmt_members[] = {
    {"tids", T_OBJECT, offsetof(Fmt, tids), READONLY, "tensor name -> its thread"},
    {"named", T_OBJECT, offsetof(Fmt, named), READONLY, "names whose thread this part names"},
    {"texts", T_OBJECT, offsetof(Fmt, texts), READONLY, "trace_key -> args text (per part)"},
    {"begun", T_OBJECT, offsetof(Fmt, begun), READONLY, "names whose B line is written"},
    {NULL}};

static PyTypeObject FmtType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._record.Formatter",
    .tp_basicsize = sizeof(Fmt),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Formatter(pid, dumps, (CAT_TENSOR, CAT_COUNTER, READY, CAT_NEGOTIATION, "
              "TID_NEGOTIATION, TID_TENSOR_BASE)): a trace file's event lines, made on the "
              "writer's thread",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fmt_init,
    .tp_dealloc = (destructor)fmt_dealloc,
    .tp_traverse = (traverseproc)fmt_traverse,
    .tp_clear = (inquiry)fmt_clear,
    .tp_methods = fmt_methods,
    .tp_members = fmt_members,
};

/* ---- the Core type ------------------------------------------------------------------------- */
#define KW (METH_VARARGS | METH_KEYWORDS)
static PyMethodDef core_methods[] = {
    {"now", (PyCFunction)core_now, METH_NOARGS, "now() -> time.perf_counter_ns()"},
    {"span", (PyCFunction)(void (*)(void))core_span, KW,
     "span(tid, name, cat, args=None): with it, an X span from entry to exit"},
    {"begin", (PyCFunction)(void (*)(void))core_begin, KW,
     "begin(tid, name, cat, args=None, ts_ns=None) -> token (None when not enabled)"},
    {"end", (PyCFunction)(void (*)(void))core_end, KW,
     "end(token, args=None): the span ends now (args merged into the begin's)"},
    {"complete", (PyCFunction)(void (*)(void))core_complete, KW,
     "complete(tid, name, cat, t0_ns, t1_ns, args=None): an X span measured by the caller"},
    {"instant", (PyCFunction)(void (*)(void))core_instant, KW,
     "instant(tid, name, cat, args=None, ts_ns=None)"},
    {"counter", (PyCFunction)(void (*)(void))core_counter, KW, "counter(name, value, ts_ns=None)"},
    {"ready", (PyCFunction)(void (*)(void))core_ready, KW,
     "ready(names, rank, process_set, ts_ns): one READY instant"},
    {"ops_done", (PyCFunction)(void (*)(void))core_ops_done, KW,
     "ops_done(ops, t_done_ns, error=None) -> ops another recorder stamped (None if none)"},
    {"events_dropped", (PyCFunction)core_events_dropped, METH_NOARGS,
     "events lost to a full buffer so far"},
    {"_stop", (PyCFunction)core_stop, METH_NOARGS, "accept no record from now on"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef core_members[] = {
    {"enabled", T_BOOL, offsetof(Core, enabled), 0, "whether calls record"},
    {"step", T_LONGLONG, offsetof(Core, step), 0, "the current training step"},
    {"base_ns", T_LONGLONG, offsetof(Core, base), READONLY, "perf_counter_ns at ts 0"},
    {"closed", T_BOOL, offsetof(Core, closed), READONLY, "no record accepted any more"},
    {"py_spans", T_BOOL, offsetof(Core, py_spans), 0,
     "span/begin/end are overridden in Python (NVTX): the C API goes through them"},
    {NULL}};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._record.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Core(cap=262144): a recorder's calls and its buffer of records",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)core_init,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_methods = core_methods,
    .tp_members = core_members,
};

/* ---- the idle span ------------------------------------------------------------------------- */
static PyObject *idle_enter(PyObject *self, PyObject *Py_UNUSED(a)) { return Py_NewRef(self); }
static PyObject *idle_exit(PyObject *self, PyObject *const *a, Py_ssize_t n) { Py_RETURN_FALSE; }
static PyMethodDef idle_methods[] = {
    {"__enter__", (PyCFunction)idle_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))idle_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
static PyTypeObject IdleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._record.Idle",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a span that records nothing",
    .tp_new = PyType_GenericNew,
    .tp_methods = idle_methods,
};

/* ---- the process-wide recorder and the C API (record_api.h) -------------------------------- */
static PyObject *current_rec;   /* tracer.get_recorder(): set by tracer.recorder.set_recorder */

static PyObject *mod_current(PyObject *m, PyObject *Py_UNUSED(a)) {
    return Py_NewRef(current_rec ? current_rec : Py_None);
}

static PyObject *mod_set_current(PyObject *m, PyObject *rec) {
    Py_XSETREF(current_rec, Py_NewRef(rec));
    Py_RETURN_NONE;
}

static PyObject *api_current(void) { return current_rec ? current_rec : Py_None; }

static inline int is_core(PyObject *rec) { return PyObject_TypeCheck(rec, &CoreType); }

static int api_enabled(PyObject *rec) {
    if (is_core(rec)) return ((Core *)rec)->enabled && !((Core *)rec)->closed;
    PyObject *v = PyObject_GetAttr(rec, s_enabled);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static long long api_step(PyObject *rec) {
    if (is_core(rec)) return ((Core *)rec)->step;
    PyObject *v = PyObject_GetAttr(rec, s_step);
    long long r = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    return r;
}

static long long api_now(void) { return now_ns(); }

static int api_complete(PyObject *rec, int tid, PyObject *name, PyObject *cat, PyObject *args,
                        long long t0, long long t1, long long step) {
    if (is_core(rec) && !((Core *)rec)->py_spans) {
        Core *c = (Core *)rec;
        if (c->enabled && !c->closed)
            put_rec(c, K_X, tid, name, cat, args ? args : Py_None, NULL, t0, t1, step);
        return 0;
    }
    /* Python spans (NVTX): begin at t0, end now (the NVTX range opens late, the event is exact) */
    PyObject *tok = PyObject_CallMethod(rec, "begin", "iOOOL", tid, name, cat,
                                        args ? args : Py_None, t0);
    if (!tok) return -1;
    PyObject *r = PyObject_CallMethodOneArg(rec, s_end, tok);
    Py_DECREF(tok);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *api_ops_done(PyObject *rec, PyObject *ops, long long t, PyObject *error) {
    if (is_core(rec)) return ops_done((Core *)rec, ops, t, error ? error : Py_None);
    return PyObject_CallMethod(rec, "ops_done", "OLO", ops, t, error ? error : Py_None);
}

static const RecordAPI record_api = {
    RECORD_API_VERSION, api_current, api_enabled, api_step, api_now, api_complete, api_ops_done,
};

static PyMethodDef module_methods[] = {
    {"current", (PyCFunction)mod_current, METH_NOARGS,
     "current() -> the process-wide recorder (tracer.get_recorder)"},
    {"set_current", (PyCFunction)mod_set_current, METH_O,
     "set_current(rec): install the process-wide recorder (tracer.recorder.set_recorder)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracer._record",
                                    "The recorder's records and their formatter.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__record(void) {
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&SpanType) < 0 || PyType_Ready(&FmtType) < 0 ||
        PyType_Ready(&IdleType) < 0)
        return NULL;
    struct { PyObject **p; const char *s; } strs[] = {
        {&s_stamp, "stamp"}, {&s_trace_key, "trace_key"}, {&s_submit_ns, "submit_ns"},
        {&s_step, "step"}, {&s_end, "end"}, {&s_enabled, "enabled"}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!(*strs[i].p = PyUnicode_InternFromString(strs[i].s))) return NULL;
    if (!(idle = PyObject_CallNoArgs((PyObject *)&IdleType))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "Formatter", (PyObject *)&FmtType) < 0 ||
        PyModule_AddObjectRef(m, "IDLE", idle) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *capi = PyCapsule_New((void *)&record_api, RECORD_API_CAPSULE, NULL);
    if (!capi || PyModule_AddObjectRef(m, "_C_API", capi) < 0) {
        Py_XDECREF(capi);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(capi);
    return m;
}
