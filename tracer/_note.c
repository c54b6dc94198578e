/* A response's own lines, noted while it runs and written in one go: ``tracer._oplines.Note``.
 * Part of the tracer._oplines module; tracer/response_note.py is its twin (and what runs with
 * NVTX, whose ranges need the live moments).
 *
 * Why: a fused response on the ring wrote ~10 lines through ~15 recorder calls (its span, the
 * memcpy spans, the fill counter, the backend's spans), each on caches its own work had swept:
 * ~37 µs a response (bench/README.md, session 15). Here a call only reads the clock into a slot;
 * the lines are formatted once, by the engine's completion of the response's ops (the same C call
 * as their lifecycles), or by ``close`` when no op completed (a failed backend).
 */
#include "_buf.h"
#include <structmember.h>

#define NOTE_SPANS 8   /* backend spans kept before the oldest finished ones are written */
#define NOTE_DEPTH 4   /* nesting of backend spans */

typedef struct {
    PyObject *name, *backend;
    long long nbytes, t0, t1;
} NoteSpan;

/* vocabulary given at construction (tracer/timeline.py): names, tids and cats of the lines */
enum { V_FUSED, V_MEM_IN, V_MEM_OUT, V_FILL, V_TID_FUSION, V_TID_BACKEND, V_CAT_FUSION,
       V_CAT_MEMCPY, V_CAT_COMM, NVOCAB };

typedef struct {
    PyObject_HEAD
    PyObject *lines;          /* the recorder's tracer._oplines.Lines */
    PyObject *vocab[NVOCAB];
    long long base;
    PyObject *args;           /* the open response's FUSED_RESPONSE args (NULL: none open) */
    PyObject *size;           /* ... its process set's size */
    long long t_response, t_deq, marks[4];   /* -1: not noted */
    NoteSpan spans[NOTE_SPANS];
    int nspans, depth, stack[NOTE_DEPTH];
    int skipped;              /* spans entered inside the deepest kept one (or with none open) */
    PyObject *pending, *pending_backend;   /* span(name, nbytes, backend) before __enter__ */
    long long pending_bytes;
} Note;

static PyObject *s_response, *s_bytes, *s_backend, *s_process_set, *s_step, *s_size, *s_queue_ns;

static void note_reset(Note *n) {
    Py_CLEAR(n->args);
    Py_CLEAR(n->size);
    Py_CLEAR(n->pending);
    Py_CLEAR(n->pending_backend);
    for (int i = 0; i < n->nspans; i++) {
        Py_CLEAR(n->spans[i].name);
        Py_CLEAR(n->spans[i].backend);
    }
    n->nspans = n->depth = n->skipped = 0;
    n->t_response = n->t_deq = -1;
    for (int i = 0; i < 4; i++) n->marks[i] = -1;
}

static int note_traverse(Note *n, visitproc visit, void *arg) {
    Py_VISIT(n->lines);
    Py_VISIT(n->args);
    return 0;
}

static int note_clear(Note *n) {
    note_reset(n);
    Py_CLEAR(n->lines);
    for (int i = 0; i < NVOCAB; i++) Py_CLEAR(n->vocab[i]);
    return 0;
}

static void note_dealloc(Note *n) {
    PyObject_GC_UnTrack(n);
    note_clear(n);
    Py_TYPE(n)->tp_free((PyObject *)n);
}

static int note_init(Note *n, PyObject *args, PyObject *kw) {
    PyObject *lines, *vocab;
    long long base;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Note takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO!L", &lines, &PyTuple_Type, &vocab, &base)) return -1;
    if (!lines_check(lines) || PyTuple_GET_SIZE(vocab) != NVOCAB) {
        PyErr_SetString(PyExc_TypeError, "Note(lines, vocab of 9, base) needs a Lines");
        return -1;
    }
    note_clear(n);
    n->lines = Py_NewRef(lines);
    for (int i = 0; i < NVOCAB; i++) n->vocab[i] = Py_NewRef(PyTuple_GET_ITEM(vocab, i));
    n->base = base;
    return 0;
}

/* An X line (its record when the args are not plain), times absolute; -1 on error. */
static int put_span(Note *n, PyObject *tid, PyObject *name, PyObject *cat, long long t0,
                    long long t1, PyObject *args, PyObject *step) {
    return lines_x(n->lines, tid, name, cat, t0 - n->base, t1 - n->base, args, step);
}

/* A new dict {"response": the open response's id}: the memcpy and backend spans' args start so. */
static PyObject *response_args(Note *n) {
    PyObject *id = PyDict_GetItemWithError(n->args, s_response), *d = NULL;
    if (!id && !PyErr_Occurred())
        PyErr_SetString(PyExc_KeyError, "the response's args: response");
    if (id && (d = PyDict_New()) && PyDict_SetItem(d, s_response, id) < 0) Py_CLEAR(d);
    return d;
}

/* The finished backend spans, oldest first, the ones still open kept (their slots moved down). */
static int write_spans(Note *n, PyObject *step) {
    int ok = 0, keep = 0;
    for (int i = 0; i < n->nspans; i++) {
        NoteSpan *s = &n->spans[i];
        if (s->t1 < 0 || ok < 0) {   /* open: keep it (its stack entry follows it) */
            for (int d = 0; d < n->depth; d++)
                if (n->stack[d] == i) n->stack[d] = keep;
            n->spans[keep++] = *s;
            continue;
        }
        PyObject *a = response_args(n), *nb = NULL;
        if (!a || !(nb = PyLong_FromLongLong(s->nbytes)) || PyDict_SetItem(a, s_bytes, nb) < 0)
            ok = -1;
        if (ok == 0 && (PyDict_SetItem(a, s_backend, s->backend) < 0 ||
                        PyDict_SetItem(a, s_size, n->size) < 0))
            ok = -1;
        PyObject *v = ok == 0 ? PyDict_GetItemWithError(n->args, s_process_set) : NULL;
        if (ok == 0 && ((v && PyDict_SetItem(a, s_process_set, v) < 0) ||
                        (!v && PyErr_Occurred()) || PyDict_SetItem(a, s_step, step) < 0))
            ok = -1;
        if (ok == 0)
            ok = put_span(n, n->vocab[V_TID_BACKEND], s->name, n->vocab[V_CAT_COMM], s->t0, s->t1,
                          a, step);
        Py_XDECREF(a);
        Py_XDECREF(nb);
        Py_CLEAR(s->name);
        Py_CLEAR(s->backend);
    }
    n->nspans = keep;
    return ok;
}

/* Every line of the open response, its span ending at ``t_end``; the note is then reset. */
static int note_write(Note *n, long long t_end) {
    if (!n->args) return 0;
    PyObject *step = PyDict_GetItemWithError(n->args, s_step);
    int ok = step ? 0 : -1;
    if (!step && !PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "the response's args: step");
    if (ok == 0)
        ok = put_span(n, n->vocab[V_TID_FUSION], n->vocab[V_FUSED], n->vocab[V_CAT_FUSION],
                      n->t_deq, t_end, n->args, step);
    for (int k = 0; ok == 0 && k < 2; k++) {   /* memcpy in, then out */
        long long a = n->marks[2 * k], b = n->marks[2 * k + 1];
        if (a < 0 || b < 0) continue;
        PyObject *d = response_args(n);
        ok = d ? put_span(n, n->vocab[V_TID_FUSION], n->vocab[k ? V_MEM_OUT : V_MEM_IN],
                          n->vocab[V_CAT_MEMCPY], a, b, d, step) : -1;
        Py_XDECREF(d);
        if (ok == 0 && k == 0) {
            PyObject *fill = PyDict_GetItemWithError(n->args, s_bytes);
            if (fill)
                ok = lines_c(n->lines, n->vocab[V_FILL], b - n->base, fill);
            else if (PyErr_Occurred())
                ok = -1;
        }
    }
    if (ok == 0) {
        for (int i = 0; i < n->nspans; i++)   /* spans left open (an error): end them now */
            if (n->spans[i].t1 < 0) n->spans[i].t1 = t_end;
        ok = write_spans(n, step);
    }
    note_reset(n);
    return ok;
}

static PyTypeObject NoteType;

int note_complete(PyObject *o, long long t_end) {
    if (Py_TYPE(o) != &NoteType) return 0;
    return note_write((Note *)o, t_end) < 0 ? -1 : 1;
}

/* open(args, t_response, size): a response starts now; ``args`` are its FUSED_RESPONSE's (they
 * must hold response, bytes, backend, process_set and step; queue_ns is added when t_response is
 * not None). An open one not yet written is written first. */
static PyObject *note_open(Note *n, PyObject *const *args, Py_ssize_t nargs) {
    if (!n->lines) return PyErr_Format(PyExc_RuntimeError, "Note not initialised");
    if (nargs != 3 || !PyDict_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "open(args: dict, t_response, size)");
    long long t = now_ns();
    if (n->args && note_write(n, t) < 0) return NULL;
    if (args[1] != Py_None) {
        long long tr = PyLong_AsLongLong(args[1]);
        if (tr == -1 && PyErr_Occurred()) return NULL;
        PyObject *q = PyLong_FromLongLong(t - tr);
        int bad = !q || PyDict_SetItem(args[0], s_queue_ns, q) < 0;
        Py_XDECREF(q);
        if (bad) return NULL;
        n->t_response = tr;
    }
    n->args = Py_NewRef(args[0]);
    n->size = Py_NewRef(args[2]);
    n->t_deq = t;
    return Py_NewRef(Py_None);
}

/* mark(i): now, for 0 memcpy in begins, 1 it ends (the fill counter), 2 memcpy out, 3 it ends. */
static PyObject *note_mark(Note *n, PyObject *i) {
    long v = PyLong_AsLong(i);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < 0 || v > 3) return PyErr_Format(PyExc_ValueError, "mark takes 0..3");
    if (n->args) n->marks[v] = now_ns();
    return Py_NewRef(Py_None);
}

/* span(name, nbytes, backend) -> the note, as the context manager of a backend span */
static PyObject *note_span(Note *n, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "span(name, nbytes, backend)");
    long long nb = PyLong_AsLongLong(args[1]);
    if (nb == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyObject *i = PyNumber_Long(args[1]);   /* int(nbytes), as activity() wrote it */
        if (!i) return NULL;
        nb = PyLong_AsLongLong(i);
        Py_DECREF(i);
        if (nb == -1 && PyErr_Occurred()) return NULL;
    }
    Py_XSETREF(n->pending, Py_NewRef(args[0]));
    Py_XSETREF(n->pending_backend, Py_NewRef(args[2]));
    n->pending_bytes = nb;
    return Py_NewRef((PyObject *)n);
}

static PyObject *note_enter(Note *n, PyObject *Py_UNUSED(ignored)) {
    PyObject *name = n->pending, *backend = n->pending_backend;
    n->pending = n->pending_backend = NULL;
    if (!name || !backend) {
        Py_XDECREF(name);
        Py_XDECREF(backend);
        return PyErr_Format(PyExc_RuntimeError, "enter a Note through span()");
    }
    if (!n->args || n->depth == NOTE_DEPTH || n->skipped) {   /* not recorded */
        Py_DECREF(name);
        Py_DECREF(backend);
        n->skipped++;
        return Py_NewRef((PyObject *)n);
    }
    if (n->nspans == NOTE_SPANS) {
        PyObject *step = PyDict_GetItemWithError(n->args, s_step);
        if (!step || write_spans(n, step) < 0 || n->nspans == NOTE_SPANS) {
            Py_DECREF(name);
            Py_DECREF(backend);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "too many open spans");
            return NULL;
        }
    }
    NoteSpan *s = &n->spans[n->nspans];
    s->name = name;
    s->backend = backend;
    s->nbytes = n->pending_bytes;
    s->t1 = -1;
    n->stack[n->depth++] = n->nspans++;
    s->t0 = now_ns();
    return Py_NewRef((PyObject *)n);
}

static PyObject *note_exit(Note *n, PyObject *const *Py_UNUSED(a), Py_ssize_t Py_UNUSED(k)) {
    long long t = now_ns();
    if (n->skipped) n->skipped--;
    else if (n->args && n->depth > 0) n->spans[n->stack[--n->depth]].t1 = t;
    Py_RETURN_FALSE;
}

/* close(): the open response's lines (its span ending now), unless a completion wrote them. */
static PyObject *note_close(Note *n, PyObject *Py_UNUSED(ignored)) {
    return note_write(n, now_ns()) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *note_times(Note *n, void *Py_UNUSED(c)) {
    if (!n->args) return Py_BuildValue("(OO)", Py_None, Py_None);
    if (n->t_response < 0) return Py_BuildValue("(OL)", Py_None, n->t_deq);
    return Py_BuildValue("(LL)", n->t_response, n->t_deq);
}

static PyGetSetDef note_getset[] = {
    {"times", (getter)note_times, NULL, "(t_response, t_dequeue) of the open response", NULL},
    {NULL}};

static PyMethodDef note_methods[] = {
    {"open", (PyCFunction)(void (*)(void))note_open, METH_FASTCALL,
     "open(args, t_response, size): a response starts now"},
    {"mark", (PyCFunction)note_mark, METH_O,
     "mark(i): now, for memcpy in begin/end (0, 1) and out (2, 3)"},
    {"span", (PyCFunction)(void (*)(void))note_span, METH_FASTCALL,
     "span(name, nbytes, backend) -> the note, as a backend span's context manager"},
    {"close", (PyCFunction)note_close, METH_NOARGS,
     "close(): the response's lines now, unless written already"},
    {"__enter__", (PyCFunction)note_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))note_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject NoteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Note",
    .tp_basicsize = sizeof(Note),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Note(lines, vocab, base): a response's lines, noted as it runs, written at once",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)note_init,
    .tp_dealloc = (destructor)note_dealloc,
    .tp_traverse = (traverseproc)note_traverse,
    .tp_clear = (inquiry)note_clear,
    .tp_methods = note_methods,
    .tp_getset = note_getset,
};

/* Adds Note to the module (called by PyInit__oplines); -1 on error. */
int note_add(PyObject *m) {
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_response, "response"}, {&s_bytes, "bytes"}, {&s_backend, "backend"},
        {&s_process_set, "process_set"}, {&s_step, "step"}, {&s_size, "size"},
        {&s_queue_ns, "queue_ns"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return -1;
    if (PyType_Ready(&NoteType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Note", (PyObject *)&NoteType);
}
