/* A recorder's event lines, formatted where they are recorded: ``Lines`` of tracer._oplines.
 *
 * Why: a span or counter left as a tuple for the writer thread was formatted a second later, on
 * memory gone cold, and freed there (~1 µs a record, about half of the writer's time); a batch of
 * lifecycles went through a str the writer copied again. Here the C recording calls (Spans,
 * Completions) append their lines to one buffer under the GIL while the record is warm; the
 * writer takes the bytes whole at a flush. A record the C formatter leaves to Python (a float,
 * extra args) goes to the recorder's deque as a tuple, as before.
 */
#include "_buf.h"

/* A line head found by identity: the runtime passes the same vocabulary objects every time, so a
 * span or counter needs no key tuple, hash or dict lookup (references held: no address reuse). */
#define NHEADS 16
typedef struct {
    PyObject *ph, *tid, *name, *cat, *head;
} Head;

static PyObject *s_ph_X, *s_ph_C;

typedef struct {
    PyObject_HEAD
    Buf b;               /* lines joined by ",\n" */
    long long lines;     /* how many */
    /* the line builder's caches and callables (tracer.writer passes the same to chunk) */
    PyObject *heads, *make, *names, *make_name, *dumps, *counter_cat, *zero;
    PyObject *q, *drops; /* the deque for records left to Python; the drop counter */
    Py_ssize_t cap;      /* lines held at most: past it, new events are dropped and counted */
    Head hs[NHEADS];     /* the heads used last (replaced in turn) */
    int hs_next;
} Lines;

#define LINES_REFS(l) {&(l)->heads, &(l)->make, &(l)->names, &(l)->make_name, &(l)->dumps, \
                       &(l)->counter_cat, &(l)->zero, &(l)->q, &(l)->drops}

static PyTypeObject LinesType;

int lines_check(PyObject *o) { return Py_IS_TYPE(o, &LinesType); }

static int lines_traverse(Lines *l, visitproc visit, void *arg) {
    PyObject **refs[] = LINES_REFS(l);
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) Py_VISIT(*refs[i]);
    for (int i = 0; i < NHEADS; i++) {
        Py_VISIT(l->hs[i].tid);
        Py_VISIT(l->hs[i].name);
        Py_VISIT(l->hs[i].cat);
    }
    return 0;
}

static void heads_clear(Lines *l) {
    for (int i = 0; i < NHEADS; i++) {
        Head *h = &l->hs[i];
        Py_CLEAR(h->ph);
        Py_CLEAR(h->tid);
        Py_CLEAR(h->name);
        Py_CLEAR(h->cat);
        Py_CLEAR(h->head);
    }
}

static int lines_clear(Lines *l) {
    PyObject **refs[] = LINES_REFS(l);
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) Py_CLEAR(*refs[i]);
    heads_clear(l);
    return 0;
}

static void lines_dealloc(Lines *l) {
    PyObject_GC_UnTrack(l);
    lines_clear(l);
    PyMem_Free(l->b.p);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static int lines_init(Lines *l, PyObject *args, PyObject *kw) {
    PyObject *heads, *make, *names, *make_name, *dumps, *counter_cat, *q, *drops;
    Py_ssize_t cap;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Lines takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!OO!OOUOnO", &PyDict_Type, &heads, &make, &PyDict_Type, &names,
                          &make_name, &dumps, &counter_cat, &q, &cap, &drops))
        return -1;
    PyObject *zero = PyLong_FromLong(0);
    if (!zero) return -1;
    PyObject **slot[] = LINES_REFS(l);
    PyObject *val[] = {heads, make, names, make_name, dumps, counter_cat, zero, q, drops};
    for (size_t i = 0; i < sizeof(val) / sizeof(val[0]); i++)
        Py_XSETREF(*slot[i], Py_NewRef(val[i]));
    Py_DECREF(zero);
    l->cap = cap;
    heads_clear(l);   /* a new line builder: new heads */
    return 0;
}

static int unready(Lines *l) {
    if (l->heads && l->q && l->drops) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Lines not initialised");
    return -1;
}

/* Count ``n`` events as dropped. */
static int drop(Lines *l, long long n) {
    for (long long i = 0; i < n; i++) {
        PyObject *r = PyIter_Next(l->drops);
        if (!r) return PyErr_Occurred() ? -1 : 0;
        Py_DECREF(r);
    }
    return 0;
}

/* Append ``count`` lines of text (joined by ",\n"), unless the buffer is full. */
int lines_text(PyObject *self, const char *p, Py_ssize_t n, long long count) {
    Lines *l = (Lines *)self;
    if (unready(l)) return -1;
    if (count <= 0) return 0;
    if (l->lines >= l->cap) return drop(l, count);
    Py_ssize_t mark = l->b.len;
    if ((l->b.len && PUT_LIT(&l->b, ",\n")) || put(&l->b, p, n)) {
        l->b.len = mark;
        return -1;
    }
    l->lines += count;
    return 0;
}

/* One record tuple (as the writer's chunk reads them) as its line now; a record the C formatter
 * leaves to Python goes to the deque. The line is formatted apart and appended whole: a head or
 * name made on a miss, or the serialiser, runs Python code, and another thread may append its own
 * lines meanwhile. */
int lines_record(PyObject *self, PyObject *rec) {
    Lines *l = (Lines *)self;
    if (unready(l)) return -1;
    if (l->lines >= l->cap) return drop(l, 1);
    Buf b = {0};
    int ok = put_record(&b, rec, l->heads, l->make, l->names, l->make_name, l->dumps,
                        l->counter_cat, l->zero);
    if (ok == 1) ok = lines_text(self, b.p, b.len, 1);
    else if (ok == 0) ok = buffer_record(l->q, l->cap, l->drops, rec, 1);
    PyMem_Free(b.p);
    return ok;
}

/* The head of a (ph, tid, name, cat) line (borrowed; valid until the next call), NULL on error. */
static PyObject *head(Lines *l, PyObject *ph, PyObject *tid, PyObject *name, PyObject *cat) {
    for (int i = 0; i < NHEADS; i++) {
        Head *h = &l->hs[i];
        if (h->name == name && h->tid == tid && h->cat == cat && h->ph == ph) return h->head;
    }
    PyObject *made = head_of(l->heads, l->make, ph, tid, name, cat);
    if (!made) return NULL;
    if (!PyUnicode_CheckExact(made)) {
        Py_DECREF(made);
        PyErr_SetString(PyExc_TypeError, "a line head must be a str");
        return NULL;
    }
    Head *h = &l->hs[l->hs_next];
    l->hs_next = (l->hs_next + 1) % NHEADS;
    PyObject *old[] = {h->ph, h->tid, h->name, h->cat, h->head};
    h->ph = Py_NewRef(ph);
    h->tid = Py_NewRef(tid);
    h->name = Py_NewRef(name);
    h->cat = Py_NewRef(cat);
    h->head = made;
    for (int i = 0; i < 5; i++) Py_XDECREF(old[i]);
    return made;
}

/* A line begins (its separator) at ``*mark``; line_end counts it when ``r`` is 1 (written), else
 * takes the buffer back to the mark (0: not plain, -1: error) and returns ``r``. */
static int line_start(Lines *l, Py_ssize_t *mark) {
    *mark = l->b.len;
    return l->b.len && PUT_LIT(&l->b, ",\n") ? -1 : 0;
}

static int line_end(Lines *l, Py_ssize_t mark, int r) {
    if (r == 1) {
        l->lines++;
        return 1;
    }
    l->b.len = mark;
    return r;
}

/* lines_span and lines_counter write into the shared buffer directly, so nothing in them runs
 * Python code once a line has begun: the head (made on a miss) comes first, and args that are not
 * plain take the record path. */
int lines_span(PyObject *self, PyObject *tid, PyObject *name, PyObject *cat, long long t0,
               long long t1, PyObject *args, PyObject *step) {
    Lines *l = (Lines *)self;
    if (unready(l)) return -1;
    if (!PyLong_CheckExact(step) || !PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(cat))
        return 0;
    if (l->lines >= l->cap) return drop(l, 1) < 0 ? -1 : 1;
    PyObject *h = head(l, s_ph_X, tid, name, cat);
    Py_ssize_t mark;
    if (!h || line_start(l, &mark) < 0) return -1;
    return line_end(l, mark, put_obj(&l->b, h) ? -1 : put_x_rest(&l->b, t0, t1, NULL, args, step));
}

int lines_counter(PyObject *self, PyObject *name, long long t, PyObject *value) {
    Lines *l = (Lines *)self;
    if (unready(l)) return -1;
    if (!PyLong_CheckExact(value) || !PyUnicode_CheckExact(name)) return 0;
    if (l->lines >= l->cap) return drop(l, 1) < 0 ? -1 : 1;
    PyObject *h = head(l, s_ph_C, l->zero, name, l->counter_cat);
    Py_ssize_t mark;
    if (!h || line_start(l, &mark) < 0) return -1;
    return line_end(l, mark, put_obj(&l->b, h) ? -1 : put_c_rest(&l->b, t, value));
}

/* A record tuple (consumed) to the lines: -1 on error (NULL ``rec``: its making failed). */
static int put_record_of(PyObject *self, PyObject *rec) {
    int r = rec ? lines_record(self, rec) : -1;
    Py_XDECREF(rec);
    return r < 0 ? -1 : 0;
}

int lines_x(PyObject *self, PyObject *tid, PyObject *name, PyObject *cat, long long t0,
            long long t1, PyObject *args, PyObject *step) {
    int w = lines_span(self, tid, name, cat, t0, t1, args, step);
    if (w) return w < 0 ? -1 : 0;
    PyObject *a = PyLong_FromLongLong(t0), *b = PyLong_FromLongLong(t1);
    PyObject *rec = a && b ? PyTuple_Pack(9, s_ph_X, name, cat, tid, a, b, step,
                                          args ? args : Py_None, Py_None) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return put_record_of(self, rec);
}

int lines_c(PyObject *self, PyObject *name, long long t, PyObject *value) {
    int w = lines_counter(self, name, t, value);
    if (w) return w < 0 ? -1 : 0;
    PyObject *rel = PyLong_FromLongLong(t);
    PyObject *rec = rel ? PyTuple_Pack(4, s_ph_C, name, rel, value) : NULL;
    Py_XDECREF(rel);
    return put_record_of(self, rec);
}

static PyObject *lines_put(Lines *l, PyObject *args) {
    PyObject *text;
    long long count;
    if (!PyArg_ParseTuple(args, "UL", &text, &count)) return NULL;
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (!p || lines_text((PyObject *)l, p, n, count) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *lines_record_py(Lines *l, PyObject *rec) {
    if (!PyTuple_CheckExact(rec)) return PyErr_Format(PyExc_TypeError, "a record is a tuple");
    if (lines_record((PyObject *)l, rec) < 0) return NULL;
    Py_RETURN_NONE;
}

#define KEEP_BYTES (8 << 20)   /* a flush's worth of lines is ~1 MB a second in the demo */

/* The lines so far as (bytes, count); the buffer starts again empty (its memory kept, up to
 * KEEP_BYTES). */
static PyObject *lines_take(Lines *l, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyBytes_FromStringAndSize(l->b.p ? l->b.p : "", l->b.len);
    if (!out) return NULL;
    PyObject *res = Py_BuildValue("(NL)", out, l->lines);
    if (res) {
        l->b.len = 0;
        l->lines = 0;
        if (l->b.cap > KEEP_BYTES) {   /* after a burst: give the memory back */
            PyMem_Free(l->b.p);
            l->b.p = NULL;
            l->b.cap = 0;
        }
    }
    return res;
}

static Py_ssize_t lines_len(Lines *l) { return (Py_ssize_t)l->lines; }

static PyMethodDef lines_methods[] = {
    {"put", (PyCFunction)lines_put, METH_VARARGS, "put(text, n): n lines joined by \",\\n\""},
    {"record", (PyCFunction)lines_record_py, METH_O,
     "record(tuple): a deferred record's line now (or the tuple to the deque when unusual)"},
    {"take", (PyCFunction)lines_take, METH_NOARGS, "take() -> (bytes, lines), emptying the buffer"},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods lines_as_sequence = {.sq_length = (lenfunc)lines_len};

static PyTypeObject LinesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Lines",
    .tp_basicsize = sizeof(Lines),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Lines(heads, make, names, make_name, dumps, counter_cat, q, cap, drops): a "
              "recorder's event lines, formatted where they are recorded",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)lines_init,
    .tp_dealloc = (destructor)lines_dealloc,
    .tp_traverse = (traverseproc)lines_traverse,
    .tp_clear = (inquiry)lines_clear,
    .tp_methods = lines_methods,
    .tp_as_sequence = &lines_as_sequence,
};

int lines_add(PyObject *m) {
    if (!(s_ph_X = PyUnicode_InternFromString("X")) || !(s_ph_C = PyUnicode_InternFromString("C")))
        return -1;
    if (PyType_Ready(&LinesType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Lines", (PyObject *)&LinesType);
}
