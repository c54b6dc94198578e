/* The recorder's span and counter calls in C: ``begin``, ``end``, ``counter`` and ``counters`` of
 * tracer.timeline.TimelineRecorder (the same records), for a recorder without NVTX. Part of the
 * tracer._oplines module.
 *
 * Why C: the runtime opens and closes a few dozen spans a step (responses, memcpy, the backend's
 * phases, the framework's waits), each a Python method call on caches the step has swept; a
 * Python frame there costs microseconds (``span`` saves the two of a context manager too). Here a
 * span's end or a counter writes its line straight into the recorder's ``Lines``
 * (tracer/_lines.c); only a line with values the C formatter leaves to Python, or a tensor's span,
 * goes there as a record tuple. The recorder's ``enabled`` and ``step`` are read from its instance
 * dict at each call, so nothing needs to be kept in sync.
 */
#include "_buf.h"

typedef struct {
    PyObject_HEAD
    PyObject *state;   /* the recorder's __dict__: "enabled", "step" */
    PyObject *lines;   /* where the records go (tracer._oplines.Lines) */
    long long base;
    PyObject *depth_name, *bytes_name;   /* queue_counters' two counters */
    PyObject *step_span;                 /* mark_step's (tid, name, cat), or NULL: not offered */
    long long depth, nbytes;             /* ... their values last written */
    int written;                         /* ... whether any were */
} Spans;

static PyObject *s_enabled, *s_step_key, *s_step_t0, *s_S, *s_X;

static int spans_traverse(Spans *s, visitproc visit, void *arg) {
    Py_VISIT(s->state);
    Py_VISIT(s->lines);
    Py_VISIT(s->depth_name);
    Py_VISIT(s->bytes_name);
    Py_VISIT(s->step_span);
    return 0;
}

static int spans_clear(Spans *s) {
    Py_CLEAR(s->state);
    Py_CLEAR(s->lines);
    Py_CLEAR(s->depth_name);
    Py_CLEAR(s->bytes_name);
    Py_CLEAR(s->step_span);
    return 0;
}

static void spans_dealloc(Spans *s) {
    PyObject_GC_UnTrack(s);
    spans_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int spans_init(Spans *s, PyObject *args, PyObject *kw) {
    PyObject *state, *lines, *depth_name, *bytes_name, *step_span = NULL;
    long long base;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Spans takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!OLUU|O!", &PyDict_Type, &state, &lines, &base, &depth_name,
                          &bytes_name, &PyTuple_Type, &step_span))
        return -1;
    if (step_span && PyTuple_GET_SIZE(step_span) != 3) {
        PyErr_SetString(PyExc_TypeError, "step_span is (tid, name, cat)");
        return -1;
    }
    if (!lines_check(lines)) {
        PyErr_SetString(PyExc_TypeError, "Spans needs a tracer._oplines.Lines");
        return -1;
    }
    Py_XSETREF(s->state, Py_NewRef(state));
    Py_XSETREF(s->lines, Py_NewRef(lines));
    Py_XSETREF(s->depth_name, Py_NewRef(depth_name));
    Py_XSETREF(s->bytes_name, Py_NewRef(bytes_name));
    Py_XSETREF(s->step_span, Py_XNewRef(step_span));
    s->base = base;
    s->written = 0;
    return 0;
}

/* Positional and keyword arguments of a vectorcall, by name: ``out[i]`` for ``names[i]`` (borrowed;
 * left as they are when not given). */
static int parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fn,
                 const char *const *names, int n, int required, PyObject **out) {
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments", fn, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) i++;
        if (i == n || i < nargs) {
            PyErr_Format(PyExc_TypeError, "%s got an unexpected or repeated argument %R", fn, key);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (int i = 0; i < required; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s missing argument '%s'", fn, names[i]);
            return -1;
        }
    return 0;
}

/* -1 with an error when ``s`` was made by __new__ alone (or cleared by the collector). */
static int unready(Spans *s) {
    if (s->state && s->lines && s->depth_name && s->bytes_name) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Spans not initialised");
    return -1;
}

/* Whether the recorder is enabled (1/0), -1 on error. */
static int enabled(Spans *s) {
    PyObject *on = PyDict_GetItemWithError(s->state, s_enabled);
    if (!on) return PyErr_Occurred() ? -1 : 0;
    return PyObject_IsTrue(on);
}

/* begin(tid, name, cat, args=None, tensor=None, ts_ns=None) -> token or None (not enabled) */
static PyObject *spans_begin(Spans *s, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    static const char *const names[] = {"tid", "name", "cat", "args", "tensor", "ts_ns"};
    PyObject *a[6] = {NULL, NULL, NULL, Py_None, Py_None, Py_None};
    if (unready(s) || parse(args, nargs, kwnames, "begin", names, 6, 3, a) < 0) return NULL;
    int on = enabled(s);
    if (on <= 0) return on < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *step = PyDict_GetItemWithError(s->state, s_step_key);
    if (!step) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_AttributeError, "recorder has no step");
        return NULL;
    }
    PyObject *t0 = a[5] == Py_None ? PyLong_FromLongLong(now_ns()) : Py_NewRef(a[5]);
    if (!t0) return NULL;
    PyObject *tok = PyTuple_Pack(8, a[0], a[1], a[2], a[3], t0, step, Py_None, a[4]);
    Py_DECREF(t0);
    return tok;
}

/* ``rec`` (one event; consumed) to the recorder's lines (dropped and counted when they are full):
 * the path of lines with values the C formatter leaves to Python, and of tensor spans. */
static PyObject *put_rec(Spans *s, PyObject *rec) {
    if (!rec) return NULL;
    int r = lines_record(s->lines, rec);
    Py_DECREF(rec);
    return r < 0 ? NULL : Py_NewRef(Py_None);
}

/* end(token, extra_args=None): the span of ``token`` (from begin) ends now. */
static PyObject *spans_end(Spans *s, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"token", "extra_args"};
    PyObject *a[2] = {NULL, Py_None};
    if (unready(s) || parse(args, nargs, kwnames, "end", names, 2, 1, a) < 0) return NULL;
    PyObject *tok = a[0], *extra = a[1];
    if (tok == Py_None) return Py_NewRef(Py_None);
    long long t1 = now_ns();
    if (!PyTuple_CheckExact(tok) || PyTuple_GET_SIZE(tok) != 8)
        return PyErr_Format(PyExc_TypeError, "end() needs a token from begin()");
    if (PyTuple_GET_ITEM(tok, 6) != Py_None)
        return PyErr_Format(PyExc_ValueError, "a token with an NVTX range ended without NVTX");
    PyObject *tid = PyTuple_GET_ITEM(tok, 0), *name = PyTuple_GET_ITEM(tok, 1),
             *cat = PyTuple_GET_ITEM(tok, 2), *sargs = PyTuple_GET_ITEM(tok, 3),
             *step = PyTuple_GET_ITEM(tok, 5), *tensor = PyTuple_GET_ITEM(tok, 7);
    long long t0 = PyLong_AsLongLong(PyTuple_GET_ITEM(tok, 4));
    if (t0 == -1 && PyErr_Occurred()) return NULL;
    if (extra == Py_None && tensor == Py_None)   /* the common case: its line at once */
        return lines_x(s->lines, tid, name, cat, t0 - s->base, t1 - s->base, sargs, step) < 0
                   ? NULL : Py_NewRef(Py_None);
    PyObject *rel0 = PyLong_FromLongLong(t0 - s->base), *rel1 = PyLong_FromLongLong(t1 - s->base);
    PyObject *rec = NULL;
    if (rel0 && rel1) {
        if (sargs == Py_None && extra == Py_None)   /* a span about one tensor */
            rec = PyTuple_Pack(8, s_S, name, cat, tid, tensor, rel0, rel1, step);
        else
            rec = PyTuple_Pack(9, s_X, name, cat, tid, rel0, rel1, step, sargs, extra);
    }
    Py_XDECREF(rel0);
    Py_XDECREF(rel1);
    return put_rec(s, rec);
}

/* A counter's line at ``t`` (relative), or its record ("C", name, t, value) buffered when the
 * value is not plain (a new reference to None, NULL on error). */
static PyObject *put_counter(Spans *s, PyObject *name, long long t, PyObject *value) {
    return lines_c(s->lines, name, t, value) < 0 ? NULL : Py_NewRef(Py_None);
}

/* ``ts_ns`` (None: now) relative to the base, in *t; -1 on error. */
static int rel_time(Spans *s, PyObject *ts_ns, long long *t) {
    if (ts_ns == Py_None) {
        *t = now_ns() - s->base;
        return 0;
    }
    long long v = PyLong_AsLongLong(ts_ns);
    if (v == -1 && PyErr_Occurred()) return -1;
    *t = v - s->base;
    return 0;
}

/* counter(name, value, ts_ns=None) */
static PyObject *spans_counter(Spans *s, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    static const char *const names[] = {"name", "value", "ts_ns"};
    PyObject *a[3] = {NULL, NULL, Py_None};
    if (unready(s) || parse(args, nargs, kwnames, "counter", names, 3, 2, a) < 0) return NULL;
    int on = enabled(s);
    if (on <= 0) return on < 0 ? NULL : Py_NewRef(Py_None);
    long long t;
    return rel_time(s, a[2], &t) < 0 ? NULL : put_counter(s, a[0], t, a[1]);
}

/* counters(((name, value), ...), ts_ns=None): several at one time */
static PyObject *spans_counters(Spans *s, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    static const char *const names[] = {"values", "ts_ns"};
    PyObject *a[2] = {NULL, Py_None};
    if (unready(s) || parse(args, nargs, kwnames, "counters", names, 2, 1, a) < 0) return NULL;
    int on = enabled(s);
    if (on <= 0) return on < 0 ? NULL : Py_NewRef(Py_None);
    long long t;
    if (rel_time(s, a[1], &t) < 0) return NULL;
    PyObject *seq = PySequence_Fast(a[0], "counters takes a sequence of (name, value)");
    if (!seq) return NULL;
    int ok = 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); ok && i < n; i++) {
        PyObject *nv = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(nv) || PyTuple_GET_SIZE(nv) != 2) {
            PyErr_SetString(PyExc_TypeError, "counters takes a sequence of (name, value)");
            ok = 0;
            break;
        }
        PyObject *r = put_counter(s, PyTuple_GET_ITEM(nv, 0), t, PyTuple_GET_ITEM(nv, 1));
        ok = r != NULL;
        Py_XDECREF(r);
    }
    Py_DECREF(seq);
    return ok ? Py_NewRef(Py_None) : NULL;
}

/* queue_counters(depth, nbytes): the queue-depth and bytes-in-flight counters now, unless both
 * equal the values last written (the engine calls this every cycle that did something). */
static PyObject *spans_queue_counters(Spans *s, PyObject *const *args, Py_ssize_t nargs) {
    if (unready(s)) return NULL;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "queue_counters takes (depth, nbytes)");
    int on = enabled(s);
    if (on <= 0) return on < 0 ? NULL : Py_NewRef(Py_None);
    long long depth = PyLong_AsLongLong(args[0]), nbytes = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (s->written && depth == s->depth && nbytes == s->nbytes) return Py_NewRef(Py_None);
    long long t = now_ns() - s->base;
    PyObject *r = put_counter(s, s->depth_name, t, args[0]);
    if (r) {
        Py_DECREF(r);
        r = put_counter(s, s->bytes_name, t, args[1]);
    }
    if (r) {
        s->depth = depth;
        s->nbytes = nbytes;
        s->written = 1;
    }
    return r;
}

/* mark_step(step=None): the STEP span of the step ending now (when enabled and the step is known)
 * and the next step, as the recorder's mark_step does for a recorder with no window of steps and
 * no NVTX (the only one this is bound on): its "step" and "_step_t0" are set in its dict. */
static PyObject *spans_mark_step(Spans *s, PyObject *const *args, Py_ssize_t nargs) {
    if (unready(s)) return NULL;
    if (!s->step_span) return PyErr_Format(PyExc_TypeError, "Spans made without step_span");
    if (nargs > 1) return PyErr_Format(PyExc_TypeError, "mark_step takes at most 1 argument");
    long long t = now_ns();
    PyObject *prev = PyDict_GetItemWithError(s->state, s_step_key);
    PyObject *t0 = prev ? PyDict_GetItemWithError(s->state, s_step_t0) : NULL;
    if (!prev || !t0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_AttributeError, "recorder has no step");
        return NULL;
    }
    Py_INCREF(prev);
    long long pv = PyLong_AsLongLong(prev), t0v = PyLong_AsLongLong(t0);
    int on = PyErr_Occurred() ? -1 : enabled(s);
    PyObject *next = NULL, *tn = NULL, *r = NULL;
    if (on > 0 && pv >= 0) {
        PyObject *tid = PyTuple_GET_ITEM(s->step_span, 0), *name = PyTuple_GET_ITEM(s->step_span, 1),
                 *cat = PyTuple_GET_ITEM(s->step_span, 2);
        if (lines_x(s->lines, tid, name, cat, t0v - s->base, t - s->base, Py_None, prev) < 0)
            goto done;
    } else if (on < 0) {
        goto done;
    }
    next = nargs && args[0] != Py_None ? PyNumber_Long(args[0]) : PyLong_FromLongLong(pv + 1);
    if (next && (tn = PyLong_FromLongLong(t)) && PyDict_SetItem(s->state, s_step_key, next) == 0 &&
        PyDict_SetItem(s->state, s_step_t0, tn) == 0)
        r = Py_NewRef(Py_None);
done:
    Py_DECREF(prev);
    Py_XDECREF(next);
    Py_XDECREF(tn);
    return r;
}

/* ---- span(tid, name, cat, args=None): the same as a context manager, no Python frame ---------- */

/* ``with spans.span(...):`` begins at __enter__ and ends at __exit__, as begin() and end() do;
 * the ``with`` statement calls these C methods directly (a Python context manager costs two
 * frames a span, microseconds each in the middle of a step). */
typedef struct {   /* made only by span() (no tp_new): every field set */
    PyObject_HEAD
    Spans *spans;
    PyObject *a[4];   /* tid, name, cat, args */
    PyObject *tok;    /* begin()'s token once entered (None: not enabled) */
} Span;

static void span_dealloc(Span *sp) {
    Py_XDECREF(sp->spans);
    for (int i = 0; i < 4; i++) Py_XDECREF(sp->a[i]);
    Py_XDECREF(sp->tok);
    Py_TYPE(sp)->tp_free((PyObject *)sp);
}

static PyObject *span_enter(Span *sp, PyObject *Py_UNUSED(ignored)) {
    if (sp->tok) return PyErr_Format(PyExc_RuntimeError, "a span is entered once");
    PyObject *tok = spans_begin(sp->spans, sp->a, 4, NULL);
    if (!tok) return NULL;
    sp->tok = tok;
    return Py_NewRef((PyObject *)sp);
}

static PyObject *span_exit(Span *sp, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(n)) {
    if (sp->tok && sp->tok != Py_None) {
        PyObject *r = spans_end(sp->spans, &sp->tok, 1, NULL);
        if (!r) return NULL;
        Py_DECREF(r);
        Py_SETREF(sp->tok, Py_NewRef(Py_None));
    }
    Py_RETURN_FALSE;
}

static PyMethodDef span_methods[] = {
    {"__enter__", (PyCFunction)span_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))span_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SpanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Span",
    .tp_basicsize = sizeof(Span),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a span as a context manager (made by Spans.span)",
    .tp_dealloc = (destructor)span_dealloc,
    .tp_methods = span_methods,
};

/* span(tid, name, cat, args=None) -> a context manager: the span of its ``with`` block */
static PyObject *spans_span(Spans *s, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
    static const char *const names[] = {"tid", "name", "cat", "args"};
    PyObject *a[4] = {NULL, NULL, NULL, Py_None};
    if (unready(s) || parse(args, nargs, kwnames, "span", names, 4, 3, a) < 0) return NULL;
    Span *sp = PyObject_New(Span, &SpanType);
    if (!sp) return NULL;
    sp->spans = (Spans *)Py_NewRef((PyObject *)s);
    for (int i = 0; i < 4; i++) sp->a[i] = Py_NewRef(a[i]);
    sp->tok = NULL;
    return (PyObject *)sp;
}

static PyMethodDef spans_methods[] = {
    {"begin", (PyCFunction)(void (*)(void))spans_begin, METH_FASTCALL | METH_KEYWORDS,
     "begin(tid, name, cat, args=None, tensor=None, ts_ns=None) -> token, or None when the "
     "recorder is not enabled"},
    {"end", (PyCFunction)(void (*)(void))spans_end, METH_FASTCALL | METH_KEYWORDS,
     "end(token, extra_args=None): the span ends now (one record buffered)"},
    {"counter", (PyCFunction)(void (*)(void))spans_counter, METH_FASTCALL | METH_KEYWORDS,
     "counter(name, value, ts_ns=None)"},
    {"counters", (PyCFunction)(void (*)(void))spans_counters, METH_FASTCALL | METH_KEYWORDS,
     "counters(((name, value), ...), ts_ns=None): several at one time"},
    {"queue_counters", (PyCFunction)(void (*)(void))spans_queue_counters, METH_FASTCALL,
     "queue_counters(depth, nbytes): both counters now, unless unchanged since last written"},
    {"mark_step", (PyCFunction)(void (*)(void))spans_mark_step, METH_FASTCALL,
     "mark_step(step=None): the STEP span ends now and the next step starts (no window, no NVTX)"},
    {"span", (PyCFunction)(void (*)(void))spans_span, METH_FASTCALL | METH_KEYWORDS,
     "span(tid, name, cat, args=None) -> a context manager: begin() at enter, end() at exit"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SpansType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Spans",
    .tp_basicsize = sizeof(Spans),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Spans(recorder_dict, lines, base, depth_name, bytes_name, step_span=None): a "
              "recorder's begin, end, counter, counters, queue_counters and mark_step in C",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)spans_init,
    .tp_dealloc = (destructor)spans_dealloc,
    .tp_traverse = (traverseproc)spans_traverse,
    .tp_clear = (inquiry)spans_clear,
    .tp_methods = spans_methods,
};

static PyObject *clock_now(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef clock_def = {"now_ns", clock_now, METH_NOARGS,
                                "the clock Spans uses (time.perf_counter_ns's)"};

/* Adds Spans and ``now_ns`` to the module (called by PyInit__oplines); -1 on error. */
int spans_add(PyObject *m) {
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_enabled, "enabled"}, {&s_step_key, "step"}, {&s_step_t0, "_step_t0"}, {&s_S, "S"},
        {&s_X, "X"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return -1;
    if (PyType_Ready(&SpansType) < 0 || PyType_Ready(&SpanType) < 0) return -1;
    PyObject *f = PyCFunction_NewEx(&clock_def, NULL, NULL);
    int r = f ? PyModule_AddObjectRef(m, "now_ns", f) : -1;
    Py_XDECREF(f);
    return r < 0 ? -1 : PyModule_AddObjectRef(m, "Spans", (PyObject *)&SpansType);
}
