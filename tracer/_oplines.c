/* The functions of tracer/op_lines_py.py in C: the same text for the same input (tests check it).
 *
 * Why C: a step of a data-parallel job records about a thousand events per rank, on threads that
 * share cores with training. Formatting them in Python cost ~1 ms of CPU per rank and step; here
 * a line is a few memcpy calls and integer conversions into one growing buffer. Constant text and
 * JSON escaping stay in Python (made once per tensor name, cached in a dict this code reads).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t need) {
    if (b->len + need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need) cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, s) put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static int put_ll(Buf *b, long long v) {
    char tmp[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--i] = '-';
    return put(b, tmp + i, 24 - i);
}

/* Any object as an f-string would show it: ints fast, the rest through format(obj, ""). */
static int put_obj(Buf *b, PyObject *o) {
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) return put_ll(b, v);
        PyErr_Clear();
    }
    PyObject *s = PyUnicode_CheckExact(o) ? (Py_INCREF(o), o) : PyObject_Format(o, NULL);
    if (!s) return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    int r = u ? put(b, u, n) : -1;
    Py_DECREF(s);
    return r;
}

/* ``a - base`` as an f-string would show it. */
static int put_diff(Buf *b, PyObject *a, long long base) {
    if (PyLong_CheckExact(a)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) return put_ll(b, v - base);
        PyErr_Clear();
    }
    PyObject *bo = PyLong_FromLongLong(base);
    if (!bo) return -1;
    PyObject *d = PyNumber_Subtract(a, bo);
    Py_DECREF(bo);
    if (!d) return -1;
    int r = put_obj(b, d);
    Py_DECREF(d);
    return r;
}

static PyObject *s_name, *s_meta, *s_op_type, *s_nbytes, *s_dtype, *s_shape, *s_reduce_op,
    *s_process_set, *s_rank, *s_submitted, *s_submit_ns;

enum { KEY, JNAME, ARGS, JNEG, NEGOTIATE, NSLOTS };
#define NKEY 6

/* The constant-text tuple of ``op`` (a new reference): the cached one when its key still matches
 * the op's (op_type, nbytes, dtype, shape, reduce_op, process_set), else ``make(name, key, None)``. */
static PyObject *tensor_text(PyObject *cache, PyObject *make, PyObject *op, PyObject *name) {
    static PyObject **attrs[NKEY] = {&s_op_type, &s_nbytes, &s_dtype, &s_shape, &s_reduce_op,
                                     &s_process_set};
    PyObject *vals[NKEY] = {NULL};
    PyObject *res = NULL;
    for (int i = 0; i < NKEY; i++)
        if (!(vals[i] = PyObject_GetAttr(op, *attrs[i]))) goto done;
    PyObject *c = PyDict_GetItemWithError(cache, name);
    if (!c && PyErr_Occurred()) goto done;
    if (c && PyTuple_CheckExact(c) && PyTuple_GET_SIZE(c) == NSLOTS) {
        PyObject *key = PyTuple_GET_ITEM(c, KEY);
        int same = PyTuple_CheckExact(key) && PyTuple_GET_SIZE(key) == NKEY;
        for (int i = 0; same && i < NKEY; i++) {
            same = PyObject_RichCompareBool(PyTuple_GET_ITEM(key, i), vals[i], Py_EQ);
            if (same < 0) goto done;
        }
        if (same) { Py_INCREF(c); res = c; goto done; }
    }
    PyObject *key = PyTuple_New(NKEY);
    if (!key) goto done;
    for (int i = 0; i < NKEY; i++) { PyTuple_SET_ITEM(key, i, vals[i]); vals[i] = NULL; }
    res = PyObject_CallFunctionObjArgs(make, name, key, Py_None, NULL);
    Py_DECREF(key);
    if (res && !(PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) == NSLOTS)) {
        PyErr_SetString(PyExc_TypeError, "tensor_text must return a tuple of 5");
        Py_CLEAR(res);
    }
done:
    for (int i = 0; i < NKEY; i++) Py_XDECREF(vals[i]);
    return res;
}

#define SLOT(c, i) PyTuple_GET_ITEM((c), (i))

/* Whether ``op`` is one of ``rec``'s: 1 when ``rec`` stamped it (*st: its (rec, step) stamp,
 * borrowed; *meta: a new reference to the op's meta, which keeps *st alive), 0 when it has no stamp
 * or another recorder's (then appended to *others, a list made on first use), -1 on error. */
static int mine(PyObject *op, PyObject *rec, PyObject **meta, PyObject **st, PyObject **others) {
    PyObject *m = PyObject_GetAttr(op, s_meta);
    if (!m) return -1;
    if (!PyDict_Check(m)) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_TypeError, "op.meta must be a dict");
        return -1;
    }
    PyObject *stamp = PyDict_GetItemWithError(m, s_submitted);
    if (!stamp) {
        Py_DECREF(m);
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyTuple_CheckExact(stamp) || PyTuple_GET_SIZE(stamp) < 2) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_TypeError, "op.meta['submitted'] must be (recorder, step)");
        return -1;
    }
    if (PyTuple_GET_ITEM(stamp, 0) != rec) {
        Py_DECREF(m);
        if (!*others && !(*others = PyList_New(0))) return -1;
        return PyList_Append(*others, op) < 0 ? -1 : 0;
    }
    *meta = m;
    *st = stamp;
    return 1;
}

/* The result (text, *counts, others or None), consuming ``counts`` (a tuple), ``others`` and the
 * buffer; NULL with everything released when ``counts`` is NULL (an error is set). */
static PyObject *finish(Buf *b, PyObject *counts, PyObject *others) {
    PyObject *text = counts ? PyUnicode_DecodeUTF8(b->p ? b->p : "", b->len, NULL) : NULL;
    PyMem_Free(b->p);
    PyObject *head = text ? PyTuple_Pack(1, text) : NULL;
    PyObject *tail = head ? PyTuple_Pack(1, others ? others : Py_None) : NULL;
    PyObject *all = NULL;
    if (tail) {
        PyObject *front = PySequence_Concat(head, counts);
        all = front ? PySequence_Concat(front, tail) : NULL;
        Py_XDECREF(front);
    }
    Py_XDECREF(text);
    Py_XDECREF(head);
    Py_XDECREF(tail);
    Py_XDECREF(counts);
    Py_XDECREF(others);
    return all;
}

static int sep(Buf *b) { return b->len ? PUT_LIT(b, ",\n") : 0; }

/* The start of one lifecycle line, up to its args: {"name":JEV HEAD TS e-3,"id2":{"local":JN},"args":
 * where TS is ``tobj - base`` when ``tobj`` is given, else ``t``. */
static int put_line(Buf *b, PyObject *jev, PyObject *head, PyObject *tobj, long long base,
                    long long t, PyObject *jn) {
    return PUT_LIT(b, "{\"name\":") || put_obj(b, jev) || put_obj(b, head) ||
           (tobj ? put_diff(b, tobj, base) : put_ll(b, t)) ||
           PUT_LIT(b, "e-3,\"id2\":{\"local\":") || put_obj(b, jn) || PUT_LIT(b, "},\"args\":");
}

static int unpack_heads(PyObject *heads, PyObject **hb, PyObject **he, PyObject **jq) {
    if (!PyTuple_CheckExact(heads) || PyTuple_GET_SIZE(heads) != 3) {
        PyErr_SetString(PyExc_TypeError, "heads must be a tuple of 3 strings");
        return -1;
    }
    *hb = PyTuple_GET_ITEM(heads, 0);
    *he = PyTuple_GET_ITEM(heads, 1);
    *jq = PyTuple_GET_ITEM(heads, 2);
    return 0;
}

static PyObject *begins(PyObject *self, PyObject *args) {
    PyObject *rec, *cache, *make, *heads, *opened, *ops, *hb, *he, *jq;
    long long base;
    if (!PyArg_ParseTuple(args, "OO!OOOOL", &rec, &PyDict_Type, &cache, &make, &heads, &opened,
                          &ops, &base))
        return NULL;
    if (unpack_heads(heads, &hb, &he, &jq) < 0) return NULL;
    if (opened != Py_None && !PyDict_Check(opened))
        return PyErr_Format(PyExc_TypeError, "opened must be a dict or None");
    PyObject *seq = PySequence_Fast(ops, "ops must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    PyObject *others = NULL;
    long long n = 0;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(seq, i), *meta = NULL, *st = NULL, *name = NULL;
        PyObject *c = NULL, *t = NULL;
        int ok = mine(op, rec, &meta, &st, &others);
        if (ok < 0) goto fail;
        if (!ok) continue;
        ok = -1;
        n++;
        if (opened == Py_None) { Py_DECREF(meta); continue; }
        if (!(name = PyObject_GetAttr(op, s_name))) goto item_done;
        if (!(t = PyObject_GetAttr(op, s_submit_ns))) goto item_done;
        if (!(c = tensor_text(cache, make, op, name))) goto item_done;
        if (PyDict_SetItem(opened, name, c) < 0) goto item_done;
        PyObject *step = PyTuple_GET_ITEM(st, 1), *jn = SLOT(c, JNAME);
        if (sep(&b) || put_line(&b, jn, hb, t, base, 0, jn) || put_obj(&b, SLOT(c, ARGS)) ||
            PUT_LIT(&b, "\"step\":") || put_obj(&b, step) || PUT_LIT(&b, "}},\n") ||
            put_line(&b, SLOT(c, JNEG), hb, t, base, 0, jn) || PUT_LIT(&b, "{\"step\":") ||
            put_obj(&b, step) || PUT_LIT(&b, "}}"))
            goto item_done;
        ok = 0;
    item_done:
        Py_XDECREF(t);
        Py_XDECREF(c);
        Py_XDECREF(name);
        Py_DECREF(meta);
        if (ok < 0) goto fail;
    }
    Py_DECREF(seq);
    return finish(&b, Py_BuildValue("(L)", n), others);
fail:
    Py_DECREF(seq);
    return finish(&b, NULL, others);
}

static PyObject *ends(PyObject *self, PyObject *args) {
    PyObject *rec, *cache, *make, *heads, *opened, *ops, *t_resp, *t_deq, *s, *last, *hb, *he, *jq;
    long long base, t_done;
    if (!PyArg_ParseTuple(args, "OO!OOO!OLLOOUU", &rec, &PyDict_Type, &cache, &make, &heads,
                          &PyDict_Type, &opened, &ops, &base, &t_done, &t_resp, &t_deq, &s, &last))
        return NULL;
    if (unpack_heads(heads, &hb, &he, &jq) < 0) return NULL;
    long long td = t_done - base, tr = 0, tq = td;
    int queued = t_resp != Py_None;
    if (queued) {
        tr = PyLong_AsLongLong(t_resp) - base;
        if (t_deq != Py_None) tq = PyLong_AsLongLong(t_deq) - base;
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *seq = PySequence_Fast(ops, "ops must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    PyObject *others = NULL;
    long long events = 0, unmatched = 0;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(seq, i), *meta = NULL, *st = NULL, *name = NULL;
        PyObject *c = NULL;
        int ok = mine(op, rec, &meta, &st, &others);
        if (ok < 0) goto fail;
        if (!ok) continue;
        ok = -1;
        if (!(name = PyObject_GetAttr(op, s_name))) goto item_done;
        /* the begin's text, which the end lines share (they need no args) */
        PyObject *was = PyDict_GetItemWithError(opened, name);
        if (!was) {
            if (PyErr_Occurred()) goto item_done;
            unmatched++;
            ok = 0;
            goto item_done;
        }
        if (PyTuple_CheckExact(was) && PyTuple_GET_SIZE(was) == NSLOTS) {
            c = was;
            Py_INCREF(c);
        } else if (!(c = tensor_text(cache, make, op, name))) {
            goto item_done;
        }
        if (PyDict_DelItem(opened, name) < 0) goto item_done;
        PyObject *jn = SLOT(c, JNAME), *jneg = SLOT(c, JNEG);
        if (sep(&b)) goto item_done;
        if (!queued) {
            if (put_line(&b, jneg, he, NULL, 0, td, jn) || put_obj(&b, s) || PUT_LIT(&b, ",\n") ||
                put_line(&b, jn, he, NULL, 0, td, jn) || put_obj(&b, last))
                goto item_done;
            events += 2;
        } else {
            if (put_line(&b, jneg, he, NULL, 0, tr, jn) || put_obj(&b, s) || PUT_LIT(&b, ",\n") ||
                put_line(&b, jq, hb, NULL, 0, tr, jn) || put_obj(&b, s) || PUT_LIT(&b, ",\n") ||
                put_line(&b, jq, he, NULL, 0, tq, jn) || put_obj(&b, s) || PUT_LIT(&b, ",\n") ||
                put_line(&b, jn, he, NULL, 0, td, jn) || put_obj(&b, last))
                goto item_done;
            events += 4;
        }
        ok = 0;
    item_done:
        Py_XDECREF(c);
        Py_XDECREF(name);
        Py_DECREF(meta);
        if (ok < 0) goto fail;
    }
    Py_DECREF(seq);
    return finish(&b, Py_BuildValue("(LL)", events, unmatched), others);
fail:
    Py_DECREF(seq);
    return finish(&b, NULL, others);
}

static PyObject *ready(PyObject *self, PyObject *args) {
    PyObject *tails, *make_tail, *reqs, *head, *t, *step;
    if (!PyArg_ParseTuple(args, "O!OOUOO", &PyDict_Type, &tails, &make_tail, &reqs, &head, &t, &step))
        return NULL;
    PyObject *seq = PySequence_Fast(reqs, "reqs must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i), *name, *tail = NULL, *rank = NULL, *ps = NULL;
        int ok = -1;
        if (!(name = PyObject_GetAttr(r, s_name))) goto fail;
        tail = PyDict_GetItemWithError(tails, name);
        if (tail) Py_INCREF(tail);
        else if (PyErr_Occurred() || !(tail = PyObject_CallOneArg(make_tail, name))) goto item_done;
        if (!(rank = PyObject_GetAttr(r, s_rank)) || !(ps = PyObject_GetAttr(r, s_process_set)))
            goto item_done;
        if (sep(&b) || put_obj(&b, head) || put_obj(&b, t) || PUT_LIT(&b, "e-3,\"s\":\"t\"") ||
            put_obj(&b, tail) || put_obj(&b, rank) || PUT_LIT(&b, ",\"step\":") ||
            put_obj(&b, step) || PUT_LIT(&b, ",\"process_set\":") || put_obj(&b, ps) ||
            PUT_LIT(&b, "}}"))
            goto item_done;
        ok = 0;
    item_done:
        Py_DECREF(name);
        Py_XDECREF(tail);
        Py_XDECREF(rank);
        Py_XDECREF(ps);
        if (ok < 0) goto fail;
    }
    Py_DECREF(seq);
    PyObject *text = PyUnicode_DecodeUTF8(b.p ? b.p : "", b.len, NULL);
    PyMem_Free(b.p);
    return text;
fail:
    Py_DECREF(seq);
    PyMem_Free(b.p);
    return NULL;
}

static PyMethodDef methods[] = {
    {"begins", begins, METH_VARARGS,
     "begins(rec, cache, make, heads, opened, ops, base) -> (text, n, others)"},
    {"ends", ends, METH_VARARGS,
     "ends(rec, cache, make, heads, opened, ops, base, t_done, t_resp, t_deq, s, last) -> (text, "
     "events, "
     "unmatched, others)"},
    {"ready", ready, METH_VARARGS, "ready(tails, make_tail, reqs, head, t, step) -> text"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracer._oplines",
                                    "C versions of tracer.op_lines_py (same text).", -1, methods};

PyMODINIT_FUNC PyInit__oplines(void) {
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_name, "name"}, {&s_meta, "meta"}, {&s_op_type, "op_type"}, {&s_nbytes, "nbytes"},
        {&s_dtype, "dtype"}, {&s_shape, "shape"}, {&s_reduce_op, "reduce_op"},
        {&s_process_set, "process_set"}, {&s_rank, "rank"}, {&s_submitted, "submitted"},
        {&s_submit_ns, "submit_ns"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return NULL;
    return PyModule_Create(&module);
}
