/* The functions of tracer/op_lines_py.py in C: the same text for the same input (tests check it).
 *
 * Why C: a step of a data-parallel job records about a thousand events per rank, on threads that
 * share cores with training. Formatting them in Python cost ~1 ms of CPU per rank and step; here
 * a line is a few memcpy calls and integer conversions into one growing buffer. Constant text and
 * JSON escaping stay in Python (made once per tensor name, cached in a dict this code reads).
 */
#include "_buf.h"
#include "_texts.h"
#include <structmember.h>

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

static PyObject *s_name, *s_stamp, *s_op_type, *s_nbytes, *s_dtype, *s_shape, *s_reduce_op,
    *s_process_set, *s_rank, *s_submit_ns;

/* An op's attributes, read where a slots class keeps them. Each PyObject_GetAttr goes through the
 * type's attribute cache and the member descriptor, memory that is cold in the middle of a training
 * step (an op is read ~10 times); the runtime's op type is a slots class, so its members are read at
 * their offsets (found once, the type kept alive). Any other type goes through PyObject_GetAttr. */
enum { A_NAME, A_STAMP, A_OP_TYPE, A_NBYTES, A_DTYPE, A_SHAPE, A_REDUCE_OP, A_PROCESS_SET,
       A_SUBMIT_NS, NATTR };
static PyObject **attr_names[NATTR] = {&s_name, &s_stamp, &s_op_type, &s_nbytes, &s_dtype,
                                       &s_shape, &s_reduce_op, &s_process_set, &s_submit_ns};
static PyTypeObject *slots_type;      /* the type whose offsets are known (a reference held) */
static PyTypeObject *plain_type;      /* the last type found to be no such class (same) */
static Py_ssize_t slots_off[NATTR];

static int learn_slots(PyTypeObject *tp) {
    Py_ssize_t off[NATTR];
    for (int i = 0; i < NATTR; i++) {
        PyObject *d = _PyType_Lookup(tp, *attr_names[i]);   /* borrowed */
        PyMemberDef *m = d && Py_TYPE(d) == &PyMemberDescr_Type
                             ? ((PyMemberDescrObject *)d)->d_member : NULL;
        if (!m || m->type != T_OBJECT_EX || (m->flags & READ_RESTRICTED)) {
            Py_INCREF(tp);
            Py_XSETREF(plain_type, tp);
            return 0;
        }
        off[i] = m->offset;
    }
    Py_INCREF(tp);
    Py_XSETREF(slots_type, tp);
    memcpy(slots_off, off, sizeof(off));
    return 1;
}

/* ``op.<attr i>`` (a new reference), NULL with AttributeError when it is unset or missing. */
static PyObject *op_attr(PyObject *op, int i) {
    PyTypeObject *tp = Py_TYPE(op);
    if (tp == slots_type || (tp != plain_type && learn_slots(tp))) {
        PyObject *v = *(PyObject **)((char *)op + slots_off[i]);
        if (v) return Py_NewRef(v);
    }
    return PyObject_GetAttr(op, *attr_names[i]);
}

enum { KEY, ARGS, HX, HB, HE, NSLOTS };   /* tracer/op_lines_py.py's slots */
#define NKEY 6

/* The op's key (op_type, nbytes, dtype, shape, reduce_op, process_set) into ``vals`` (new
 * references; all NULL and -1 on error). */
static int read_key(PyObject *op, PyObject **vals) {
    for (int i = 0; i < NKEY; i++)   /* A_OP_TYPE .. A_PROCESS_SET: the key, in order */
        if (!(vals[i] = op_attr(op, A_OP_TYPE + i))) {
            for (int j = 0; j < i; j++) Py_CLEAR(vals[j]);
            return -1;
        }
    return 0;
}

static void drop_key(PyObject **vals) {
    for (int i = 0; i < NKEY; i++) Py_CLEAR(vals[i]);
}

/* The constant-text tuple of the tensor ``name`` whose key is ``vals`` (a new reference): the
 * cached one when its key is still ``vals``, else ``make(name, key)``. */
static PyObject *text_of(PyObject *cache, PyObject *make, PyObject *name, PyObject **vals) {
    /* held: a comparison may run Python code, and another thread may empty the cache then */
    PyObject *c = Py_XNewRef(PyDict_GetItemWithError(cache, name));
    if (!c && PyErr_Occurred()) return NULL;
    if (c && PyTuple_CheckExact(c) && PyTuple_GET_SIZE(c) == NSLOTS) {
        PyObject *key = PyTuple_GET_ITEM(c, KEY);
        int same = PyTuple_CheckExact(key) && PyTuple_GET_SIZE(key) == NKEY;
        for (int i = 0; same && i < NKEY; i++) {
            same = PyObject_RichCompareBool(PyTuple_GET_ITEM(key, i), vals[i], Py_EQ);
            if (same < 0) { Py_DECREF(c); return NULL; }
        }
        if (same) return c;
    }
    Py_XDECREF(c);
    PyObject *key = PyTuple_New(NKEY);
    if (!key) return NULL;
    for (int i = 0; i < NKEY; i++) PyTuple_SET_ITEM(key, i, Py_NewRef(vals[i]));
    PyObject *res = PyObject_CallFunctionObjArgs(make, name, key, NULL);
    Py_DECREF(key);
    if (res && !(PyTuple_CheckExact(res) && PyTuple_GET_SIZE(res) == NSLOTS)) {
        PyErr_SetString(PyExc_TypeError, "tensor_text must return a tuple of 5");
        Py_CLEAR(res);
    }
    return res;
}

/* The constant-text tuple of ``op`` (a new reference): the cached one when its key still matches
 * the op's (op_type, nbytes, dtype, shape, reduce_op, process_set), else ``make(name, key)``. */
static PyObject *tensor_text(PyObject *cache, PyObject *make, PyObject *op, PyObject *name) {
    PyObject *vals[NKEY];
    if (read_key(op, vals) < 0) return NULL;
    PyObject *res = text_of(cache, make, name, vals);
    drop_key(vals);
    return res;
}

#define SLOT(c, i) PyTuple_GET_ITEM((c), (i))

/* Whether ``op`` is one of ``rec``'s: 1 when ``rec`` stamped it (*st: a new reference to its
 * (rec, step) stamp), 0 when it has no stamp or another recorder's (then appended to *others, a
 * list made on first use; 2 instead when ``others`` is NULL), -1 on error. */
static int mine(PyObject *op, PyObject *rec, PyObject **st, PyObject **others) {
    PyObject *stamp = op_attr(op, A_STAMP);
    if (!stamp) return -1;
    if (stamp == Py_None) {
        Py_DECREF(stamp);
        return 0;
    }
    if (!PyTuple_CheckExact(stamp) || PyTuple_GET_SIZE(stamp) < 2) {
        Py_DECREF(stamp);
        PyErr_SetString(PyExc_TypeError, "op.stamp must be (recorder, step) or None");
        return -1;
    }
    if (PyTuple_GET_ITEM(stamp, 0) != rec) {
        Py_DECREF(stamp);
        if (!others) return 2;
        if (!*others && !(*others = PyList_New(0))) return -1;
        return PyList_Append(*others, op) < 0 ? -1 : 0;
    }
    *st = stamp;
    return 1;
}

/* The result (text, count, others or None), consuming ``others`` and the buffer; NULL with
 * everything released when ``ok`` is 0 (an error is set). */
static PyObject *finish(Buf *b, int ok, long long count, PyObject *others) {
    PyObject *text = ok ? PyUnicode_DecodeUTF8(b->p ? b->p : "", b->len, NULL) : NULL;
    PyMem_Free(b->p);
    PyObject *res = text ? Py_BuildValue("(OLO)", text, count, others ? others : Py_None) : NULL;
    Py_XDECREF(text);
    Py_XDECREF(others);
    return res;
}

static int sep(Buf *b) { return b->len ? PUT_LIT(b, ",\n") : 0; }

/* Whether ``name`` is ASCII that needs no escape in JSON (then json.dumps gives it in quotes). */
static int plain_name(PyObject *name) {
    if (!PyUnicode_CheckExact(name) || !PyUnicode_IS_ASCII(name)) return 0;
    const unsigned char *d = PyUnicode_1BYTE_DATA(name);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(name); i < n; i++)
        if (d[i] < 0x20 || d[i] == '"' || d[i] == '\\') return 0;
    return 1;
}

/* A plain string (ASCII, nothing to escape) in quotes, as json.dumps gives it: 1 written, 0 not
 * plain (nothing written), -1 error. */
static int put_plain_str(Buf *b, PyObject *o) {
    if (!plain_name(o)) return 0;
    return PUT_LIT(b, "\"") || put(b, (const char *)PyUnicode_1BYTE_DATA(o), PyUnicode_GET_LENGTH(o)) ||
           PUT_LIT(b, "\"") ? -1 : 1;
}

/* The rest of a line whose args open with the tensor's (``c``): its step, ``extra`` (text after
 * the step, or NULL) and the closing braces. */
static int put_tail(Buf *b, PyObject *c, PyObject *st, PyObject *extra) {
    return put_obj(b, SLOT(c, ARGS)) || PUT_LIT(b, "\"step\":") ||
           put_obj(b, PyTuple_GET_ITEM(st, 1)) || (extra && put_obj(b, extra)) || PUT_LIT(b, "}}");
}

/* The B line of ``op`` (text ``c``, stamp ``st``) on its tensor's thread: its slice opens at its
 * submission, the end comes later. */
static int put_begin(Buf *b, PyObject *op, PyObject *c, PyObject *st, long long base) {
    PyObject *t = op_attr(op, A_SUBMIT_NS);
    if (!t) return -1;
    int r = sep(b) || put_obj(b, SLOT(c, HB)) || put_diff(b, t, base) ||
            PUT_LIT(b, "e-3,\"args\":") || put_tail(b, c, st, NULL);
    Py_DECREF(t);
    return r ? -1 : 0;
}

/* The X line of ``op`` from its texts: its head ``hx`` and its args ``args`` (n bytes each). */
static int put_x(Buf *b, PyObject *op, const char *hx, Py_ssize_t nhx, const char *args,
                 Py_ssize_t nargs, PyObject *st, long long base, long long td, PyObject *extra) {
    PyObject *t = op_attr(op, A_SUBMIT_NS);
    if (!t) return -1;
    long long ts = PyLong_AsLongLong(t);
    Py_DECREF(t);
    if (ts == -1 && PyErr_Occurred()) return -1;
    ts -= base;
    return sep(b) || put(b, hx, nhx) || put_ll(b, ts) || PUT_LIT(b, "e-3,\"dur\":") ||
           put_ll(b, td - ts) || PUT_LIT(b, "e-3,\"args\":") || put(b, args, nargs) ||
           PUT_LIT(b, "\"step\":") || put_obj(b, PyTuple_GET_ITEM(st, 1)) ||
           (extra && put_obj(b, extra)) || PUT_LIT(b, "}}") ? -1 : 0;
}

/* The X line of ``op``, submitted and done (``td``, relative) with no line written before. */
static int put_whole(Buf *b, PyObject *op, PyObject *c, PyObject *st, long long base,
                     long long td, PyObject *extra) {
    Py_ssize_t nhx, nargs;
    const char *hx = PyUnicode_AsUTF8AndSize(SLOT(c, HX), &nhx);
    const char *args = hx ? PyUnicode_AsUTF8AndSize(SLOT(c, ARGS), &nargs) : NULL;
    return args ? put_x(b, op, hx, nhx, args, nargs, st, base, td, extra) : -1;
}

/* The E line closing an op whose B is written. */
static int put_end(Buf *b, PyObject *c, PyObject *st, long long td, PyObject *extra) {
    return sep(b) || put_obj(b, SLOT(c, HE)) || put_ll(b, td) ||
           PUT_LIT(b, "e-3,\"args\":{\"step\":") || put_obj(b, PyTuple_GET_ITEM(st, 1)) ||
           (extra && put_obj(b, extra)) || PUT_LIT(b, "}}") ? -1 : 0;
}

/* One call of begins or ends: its tables, and what it has written so far. */
typedef struct {
    PyObject *rec, *cache, *make, *opened, *extra;
    long long base, td, count;
    Buf b;
    TTable *tt;      /* the completions' table (NULL: the dict alone) */
    PyObject *gen;   /* ... and the line builder's generation list */
} Pass;

/* ``fn`` on each op ``p->rec`` stamped (st: its stamp), the others collected: (text, count,
 * others). */
static PyObject *each_op(Pass *p, PyObject *ops, int (*fn)(Pass *, PyObject *, PyObject *)) {
    PyObject *seq = PySequence_Fast(ops, "ops must be a sequence"), *others = NULL;
    if (!seq) return NULL;
    int ok = 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); ok && i < n; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(seq, i), *st = NULL;
        int m = mine(op, p->rec, &st, &others);
        if (m > 0) {
            ok = fn(p, op, st) == 0;
            Py_DECREF(st);
        } else {
            ok = m == 0;
        }
    }
    Py_DECREF(seq);
    return finish(&p->b, ok, p->count, others);
}

/* An op's begin line, unless ``opened`` holds it already (then nothing); None ``opened`` counts
 * the op without writing. */
static int begin_op(Pass *p, PyObject *op, PyObject *st) {
    if (p->opened == Py_None) {
        p->count++;
        return 0;
    }
    PyObject *name = op_attr(op, A_NAME), *c = NULL;
    if (!name) return -1;
    int r = PyDict_Contains(p->opened, name);
    if (r == 0) {
        c = tensor_text(p->cache, p->make, op, name);
        r = c && !PyDict_SetItem(p->opened, name, c) &&
            !put_begin(&p->b, op, c, st, p->base) ? 0 : -1;
        if (r == 0) p->count++;
    }
    Py_XDECREF(c);
    Py_DECREF(name);
    return r < 0 ? -1 : 0;
}

/* An op's X line through the completions' table (``p->tt``): its text found there, or through
 * the dict and ``make`` and then kept there. */
static int end_op_table(Pass *p, PyObject *op, PyObject *st, PyObject *name) {
    PyObject *vals[NKEY], *c = NULL;
    if (read_key(op, vals) < 0) return -1;
    TText *s;
    int r = texts_find(p->tt, p->gen, name, vals, &s);
    if (r == 0) {
        r = (c = text_of(p->cache, p->make, name, vals)) ? texts_put(p->tt, name, c, &s) : -1;
    }
    drop_key(vals);
    if (r >= 0) {
        r = s && s->hx_len >= 0
                ? put_x(&p->b, op, s->text, s->hx_len, s->text + s->hx_len, s->args_len, st,
                        p->base, p->td, p->extra)
                : put_whole(&p->b, op, c ? c : s->c, st, p->base, p->td, p->extra);
    }
    Py_XDECREF(c);
    if (r == 0) p->count++;
    return r < 0 ? -1 : 0;
}

/* An op's lifecycle done at ``p->td``: its X line, or its E line when ``opened`` holds the op
 * (popped; its text, or anything else to look it up), the B being written. ``p->extra`` follows
 * the step in its args (NULL: nothing). */
static int end_op(Pass *p, PyObject *op, PyObject *st) {
    PyObject *name = op_attr(op, A_NAME), *c = NULL;
    if (!name) return -1;
    int r = -1;
    PyObject *was = PyDict_GET_SIZE(p->opened) ? PyDict_GetItemWithError(p->opened, name) : NULL;
    if (!was && p->tt && !PyErr_Occurred()) {
        r = end_op_table(p, op, st, name);
        Py_DECREF(name);
        return r;
    }
    if (was || !PyErr_Occurred()) {
        c = was && PyTuple_CheckExact(was) && PyTuple_GET_SIZE(was) == NSLOTS
                ? Py_NewRef(was) : tensor_text(p->cache, p->make, op, name);
        if (c && !(was ? PyDict_DelItem(p->opened, name) ||
                             put_end(&p->b, c, st, p->td, p->extra)
                       : put_whole(&p->b, op, c, st, p->base, p->td, p->extra))) {
            p->count++;
            r = 0;
        }
    }
    Py_XDECREF(c);
    Py_DECREF(name);
    return r;
}

static PyObject *begins(PyObject *Py_UNUSED(self), PyObject *args) {
    Pass p = {0};
    PyObject *ops;
    if (!PyArg_ParseTuple(args, "OO!OOOL", &p.rec, &PyDict_Type, &p.cache, &p.make, &p.opened,
                          &ops, &p.base))
        return NULL;
    if (p.opened != Py_None && !PyDict_Check(p.opened))
        return PyErr_Format(PyExc_TypeError, "opened must be a dict or None");
    return each_op(&p, ops, begin_op);
}

static PyObject *ends(PyObject *Py_UNUSED(self), PyObject *args) {
    Pass p = {0};
    PyObject *ops;
    long long t_done;
    if (!PyArg_ParseTuple(args, "OO!OO!OLLU", &p.rec, &PyDict_Type, &p.cache, &p.make,
                          &PyDict_Type, &p.opened, &ops, &p.base, &t_done, &p.extra))
        return NULL;
    p.td = t_done - p.base;
    return each_op(&p, ops, end_op);
}

/* ---- the engine's completions, in one call ------------------------------------------------ */

static PyObject *s_acquire, *s_release, *s_append;

int spans_add(PyObject *m);   /* tracer/_spans.c: the recorder's span calls */
int lines_add(PyObject *m);   /* tracer/_lines.c: a recorder's lines, formatted where recorded */
int stamp_add(PyObject *m);   /* tracer/_stamp.c: the runtime's stamp of a submitted op */
int note_add(PyObject *m);    /* tracer/_note.c: a response's lines, noted and written at once */

/* A recorder's lifecycle ends as one callable (its tables held): ``completions(done, t_done,
 * note=None)``, ``done`` = [(op, result, error)], first writes the lines of the response ``note``
 * holds open (its span ends at ``t_done``; a Note of tracer/_note.c, else its ``close()``), then
 * the lifecycles of the ops it stamped (begin lines too
 * where not written yet; each end carries its own op's step) as one record of the recorder's
 * buffer, under the lock the writer's begins of ops in flight take. What it does not write it
 * returns, for the general path: every item when any has an error, else the items stamped by
 * another recorder (None when none). The runtime finishes a few responses a step, each of up to
 * ~100s of ops; two Python frames per response cost more than the formatting (measured). */
typedef struct {
    PyObject_HEAD
    PyObject *rec, *cache, *make, *opened, *lock, *q, *drops;
    PyObject *gen;   /* the line builder's generation list, or NULL: no table */
    Py_ssize_t cap;
    long long base;
    char closed;
    TTable tt;       /* its strings and tuples hold no reference back: not traversed */
} Completions;

/* The recorder holds its Completions and they hold it: a cycle the collector must see. */
#define COMP_REFS(c) {&(c)->rec, &(c)->cache, &(c)->make, &(c)->opened, &(c)->lock, &(c)->q, \
                      &(c)->drops, &(c)->gen}

static int comp_traverse(Completions *c, visitproc visit, void *arg) {
    PyObject **refs[] = COMP_REFS(c);
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) Py_VISIT(*refs[i]);
    return 0;
}

static int comp_clear(Completions *c) {
    PyObject **refs[] = COMP_REFS(c);
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) Py_CLEAR(*refs[i]);
    texts_free(&c->tt);
    return 0;
}

static void comp_dealloc(Completions *c) {
    PyObject_GC_UnTrack(c);
    comp_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int comp_init(Completions *c, PyObject *args, PyObject *kw) {
    PyObject *rec, *cache, *make, *opened, *lock, *q, *drops, *gen = Py_None;
    Py_ssize_t cap;
    long long base;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Completions takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO!OO!OOnOL|O", &rec, &PyDict_Type, &cache, &make,
                          &PyDict_Type, &opened, &lock, &q, &cap, &drops, &base, &gen))
        return -1;
    if (gen != Py_None && !(PyList_CheckExact(gen) && PyList_GET_SIZE(gen) == 1)) {
        PyErr_SetString(PyExc_TypeError, "gen must be a list of one item, or None");
        return -1;
    }
    PyObject **slot[] = COMP_REFS(c);
    PyObject *val[] = {rec, cache, make, opened, lock, q, drops, gen == Py_None ? NULL : gen};
    for (size_t i = 0; i < sizeof(val) / sizeof(val[0]); i++)
        Py_XSETREF(*slot[i], Py_XNewRef(val[i]));
    texts_free(&c->tt);
    c->cap = cap;
    c->base = base;
    c->closed = 0;
    return 0;
}

/* A record appended to the recorder's buffer ``q``, as its ``_put`` does: unless ``q`` holds
 * ``cap`` records already, then its ``events`` are counted as dropped on ``drops``. -1 on error.
 * (tracer/_spans.c buffers its records through this too.) */
int buffer_record(PyObject *q, Py_ssize_t cap, PyObject *drops, PyObject *rec, long long events) {
    Py_ssize_t n = PyObject_Length(q);
    if (n < 0) return -1;
    if (n < cap) {
        PyObject *r = PyObject_CallMethodOneArg(q, s_append, rec);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    for (long long i = 0; i < events; i++) {
        PyObject *r = PyIter_Next(drops);
        if (!r) return PyErr_Occurred() ? -1 : 0;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *comp_call(Completions *c, PyObject *args, PyObject *kw) {
    PyObject *done, *rest = NULL, *note = Py_None;
    long long t_done;
    if (kw && PyDict_GET_SIZE(kw))
        return PyErr_Format(PyExc_TypeError, "completions take no keyword arguments");
    if (!PyArg_ParseTuple(args, "OL|O", &done, &t_done, &note)) return NULL;
    /* made by __new__ alone, or cleared by the collector */
    if (!(c->rec && c->cache && c->make && c->opened && c->lock && c->q && c->drops))
        return PyErr_Format(PyExc_RuntimeError, "Completions not initialised");
    if (note != Py_None) {   /* the response's own lines first: its span ends here */
        int w = c->closed ? 1 : note_complete(note, t_done);
        if (w == 0) {
            PyObject *r = PyObject_CallMethod(note, "close", NULL);
            w = r ? 1 : -1;
            Py_XDECREF(r);
        }
        if (w < 0) return NULL;
    }
    PyObject *seq = PySequence_Fast(done, "done must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_TypeError, "done must hold (op, result, error) tuples");
        }
        if (PyTuple_GET_ITEM(item, 2) != Py_None) {   /* errors: the general path writes them */
            PyObject *all = PySequence_List(seq);
            Py_DECREF(seq);
            return all;
        }
    }
    PyObject *got = PyObject_CallMethodNoArgs(c->lock, s_acquire);
    if (!got) { Py_DECREF(seq); return NULL; }
    Py_DECREF(got);
    Pass p = {.rec = c->rec, .cache = c->cache, .make = c->make, .opened = c->opened,
              .extra = NULL, .base = c->base, .td = t_done - c->base,
              .tt = c->gen ? &c->tt : NULL, .gen = c->gen};
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *st = NULL;
        int m = mine(PyTuple_GET_ITEM(item, 0), c->rec, &st, NULL);
        if (m == 1) {
            ok = end_op(&p, PyTuple_GET_ITEM(item, 0), st) == 0;
            Py_DECREF(st);
        } else if (m == 2) {
            ok = (rest || (rest = PyList_New(0))) && PyList_Append(rest, item) == 0;
        } else {
            ok = m == 0;
        }
    }
    /* release the lock whatever happened, keeping an error raised before */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *rel = PyObject_CallMethodNoArgs(c->lock, s_release);
    if (!rel) {
        ok = 0;
        Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb);
    } else {
        Py_DECREF(rel);
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(seq);
    if (ok && p.count && !c->closed) {
        if (lines_check(c->q)) {   /* the recorder's Lines: the bytes as they are */
            ok = lines_text(c->q, p.b.p, p.b.len, p.count) == 0;
        } else {
            PyObject *text = PyUnicode_DecodeUTF8(p.b.p, p.b.len, NULL);
            ok = text && buffer_record(c->q, c->cap, c->drops, text, p.count) == 0;
            Py_XDECREF(text);
        }
    }
    PyMem_Free(p.b.p);
    if (!ok) {
        Py_XDECREF(rest);
        return NULL;
    }
    return rest ? rest : Py_NewRef(Py_None);
}

static PyMemberDef comp_members[] = {
    {"closed", T_BOOL, offsetof(Completions, closed), 0,
     "set when the recorder's file is finished: lifecycles are then no longer buffered"},
    {NULL}};

static PyTypeObject CompletionsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Completions",
    .tp_basicsize = sizeof(Completions),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Completions(rec, cache, make, opened, lock, q, cap, drops, base, gen=None): "
              "completions(done, t_done, note=None) -> the items not written, or None (the "
              "response's note written first)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)comp_init,
    .tp_dealloc = (destructor)comp_dealloc,
    .tp_traverse = (traverseproc)comp_traverse,
    .tp_clear = (inquiry)comp_clear,
    .tp_call = (ternaryfunc)comp_call,
    .tp_members = comp_members,
};

/* Closes the READY line of the current run (rank, process set): its args and tensor list. */
static int ready_close(Buf *b, PyObject *rank, PyObject *ps, PyObject *step, Buf *names) {
    return PUT_LIT(b, "e-3,\"s\":\"t\",\"args\":{\"rank\":") || put_obj(b, rank) ||
           PUT_LIT(b, ",\"step\":") || put_obj(b, step) || PUT_LIT(b, ",\"process_set\":") ||
           put_obj(b, ps) || PUT_LIT(b, ",\"tensors\":[") || put(b, names->p, names->len) ||
           PUT_LIT(b, "]}}");
}

/* The READY lines of requests ``reqs`` that arrived together at ``t`` (relative), appended to
 * ``b`` (its lines added to *lines); -1 on error. */
static int ready_into(Buf *b, PyObject *names, PyObject *make_name, PyObject *reqs, PyObject *head,
                      PyObject *t, PyObject *step, long long *lines) {
    PyObject *seq = PySequence_Fast(reqs, "reqs must be a sequence");
    if (!seq) return -1;
    Buf jn = {0};
    PyObject *rank = NULL, *ps = NULL;   /* the current run's (new references) */
    int res = -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i), *name, *j = NULL, *rk = NULL, *p = NULL;
        int ok = -1;
        if (!(name = PyObject_GetAttr(r, s_name))) goto done;
        if (!(rk = PyObject_GetAttr(r, s_rank)) || !(p = PyObject_GetAttr(r, s_process_set)))
            goto item_done;
        int same = rank != NULL;
        if (same && (same = PyObject_RichCompareBool(rank, rk, Py_EQ)) > 0)
            same = PyObject_RichCompareBool(ps, p, Py_EQ);
        if (same < 0) goto item_done;
        if (!same) {
            if (rank && ready_close(b, rank, ps, step, &jn)) goto item_done;
            if (sep(b) || put_obj(b, head) || put_obj(b, t)) goto item_done;
            Py_XSETREF(rank, rk);
            Py_XSETREF(ps, p);
            rk = p = NULL;
            jn.len = 0;
            (*lines)++;
        }
        if (jn.len && PUT_LIT(&jn, ",")) goto item_done;
        /* a plain name is written from the name itself; its cached JSON would be one more cold
         * object in the middle of a step */
        int plain = put_plain_str(&jn, name);
        if (plain < 0) goto item_done;
        if (!plain) {
            j = PyDict_GetItemWithError(names, name);
            if (j) Py_INCREF(j);
            else if (PyErr_Occurred() || !(j = PyObject_CallOneArg(make_name, name))) goto item_done;
            if (put_obj(&jn, j)) goto item_done;
        }
        ok = 0;
    item_done:
        Py_DECREF(name);
        Py_XDECREF(j);
        Py_XDECREF(rk);
        Py_XDECREF(p);
        if (ok < 0) goto done;
    }
    res = rank && ready_close(b, rank, ps, step, &jn) ? -1 : 0;
done:
    Py_DECREF(seq);
    Py_XDECREF(rank);
    Py_XDECREF(ps);
    PyMem_Free(jn.p);
    return res;
}

/* (text, lines) of ``b``, which is freed (NULL when ``ok`` is 0). */
static PyObject *text_lines(Buf *b, int ok, long long lines) {
    PyObject *text = ok ? PyUnicode_DecodeUTF8(b->p ? b->p : "", b->len, NULL) : NULL;
    PyMem_Free(b->p);
    return text ? Py_BuildValue("(NL)", text, lines) : NULL;
}

static PyObject *ready(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *names, *make_name, *reqs, *head, *t, *step;
    if (!PyArg_ParseTuple(args, "O!OOUOO", &PyDict_Type, &names, &make_name, &reqs, &head, &t,
                          &step))
        return NULL;
    Buf b = {0};
    long long lines = 0;
    int ok = ready_into(&b, names, make_name, reqs, head, t, step, &lines) == 0;
    return text_lines(&b, ok, lines);
}

/* ready() for each (reqs, t) of ``held`` (t absolute: ``t - base`` is written). */
static PyObject *ready_held(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *names, *make_name, *held, *head, *step;
    long long base;
    if (!PyArg_ParseTuple(args, "O!OOULO", &PyDict_Type, &names, &make_name, &held, &head, &base,
                          &step))
        return NULL;
    PyObject *seq = PySequence_Fast(held, "held must be a sequence");
    if (!seq) return NULL;
    Buf b = {0};
    long long lines = 0;
    int ok = 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); ok && i < n; i++) {
        PyObject *h = PySequence_Fast_GET_ITEM(seq, i), *t = NULL;
        long long ts;
        ok = PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) == 2;
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "held must hold (reqs, t) tuples");
            break;
        }
        ts = PyLong_AsLongLong(PyTuple_GET_ITEM(h, 1));
        ok = !(ts == -1 && PyErr_Occurred()) && (t = PyLong_FromLongLong(ts - base)) &&
             ready_into(&b, names, make_name, PyTuple_GET_ITEM(h, 0), head, t, step, &lines) == 0;
        Py_XDECREF(t);
    }
    Py_DECREF(seq);
    return text_lines(&b, ok, lines);
}

/* ---- the writer's side: a flush's records as one chunk of bytes ------------------------------ */

static PyObject *s_step, *s_X, *s_C;

/* The head of a line, {"name":...,"ts": for (ph, tid, name, cat): cached in ``heads``, made by
 * ``make`` on a miss (a new reference). */
PyObject *head_of(PyObject *heads, PyObject *make, PyObject *ph, PyObject *tid, PyObject *name,
                  PyObject *cat) {
    PyObject *key = PyTuple_Pack(4, ph, tid, name, cat);
    if (!key) return NULL;
    PyObject *h = PyDict_GetItemWithError(heads, key);
    if (h) Py_INCREF(h);
    else if (!PyErr_Occurred()) h = PyObject_CallFunctionObjArgs(make, ph, tid, name, cat, NULL);
    Py_DECREF(key);
    return h;
}

static int is_int(PyObject *o) { return PyLong_CheckExact(o); }

/* A JSON value written by hand when it is plain: an int that fits 64 bits, a plain string, None,
 * a bool, or a tuple or list of plain strings. 1 written, 0 not plain, -1 error. */
static int put_plain_value(Buf *b, PyObject *v) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        return put_ll(b, x) ? -1 : 1;
    }
    if (PyUnicode_CheckExact(v)) return put_plain_str(b, v);
    if (v == Py_None) return PUT_LIT(b, "null") ? -1 : 1;
    if (v == Py_True) return PUT_LIT(b, "true") ? -1 : 1;
    if (v == Py_False) return PUT_LIT(b, "false") ? -1 : 1;
    if (!PyTuple_CheckExact(v) && !PyList_CheckExact(v)) return 0;
    PyObject *seq = PySequence_Fast(v, "");
    if (!seq) return -1;
    int r = PUT_LIT(b, "[") ? -1 : 1;
    for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(seq); r == 1 && i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        r = (i && PUT_LIT(b, ",")) ? -1 : PyUnicode_CheckExact(x) ? put_plain_str(b, x) : 0;
    }
    Py_DECREF(seq);
    return r == 1 && PUT_LIT(b, "]") ? -1 : r;
}

/* ``args`` (a dict) written by hand, as orjson would, with the step after them when they have
 * none: 1 written, 0 when some key or value is not plain (``b`` may then hold part of it), -1
 * error. Most span args are ints and names: no call into the serialiser. */
static int put_plain_args(Buf *b, PyObject *args, PyObject *step) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    int has_step = 0, r = 1;
    if (PUT_LIT(b, "{")) return -1;
    for (int first = 1; r == 1 && PyDict_Next(args, &pos, &k, &v); first = 0) {
        if (!PyUnicode_CheckExact(k)) return 0;
        has_step |= PyUnicode_Compare(k, s_step) == 0;
        r = (!first && PUT_LIT(b, ",")) ? -1 : put_plain_str(b, k);
        if (r == 1) r = PUT_LIT(b, ":") ? -1 : put_plain_value(b, v);
    }
    if (r != 1) return r;
    if (!has_step && (PUT_LIT(b, ",\"step\":") || put_obj(b, step))) return -1;
    return PUT_LIT(b, "}") ? -1 : 1;
}

/* The args object of an X span: ``args`` (a dict or None) with the step when it has none, as
 * tracer.lines.jargs writes it. 1 when written, 0 when the record needs the Python formatter. Args
 * that are not plain go through ``dumps``, or give 0 when it is NULL (no Python code runs then). */
int put_span_args(Buf *b, PyObject *dumps, PyObject *args, PyObject *step) {
    if (args != Py_None && !PyDict_CheckExact(args)) return 0;
    if (args == Py_None || PyDict_GET_SIZE(args) == 0)
        return (PUT_LIT(b, "{\"step\":") || put_obj(b, step) || PUT_LIT(b, "}")) ? -1 : 1;
    Py_ssize_t mark = b->len;
    int plain = put_plain_args(b, args, step);
    if (plain != 0) return plain;
    b->len = mark;
    if (!dumps) return 0;
    int has = PyDict_Contains(args, s_step);
    if (has < 0) return -1;
    PyObject *j = PyObject_CallOneArg(dumps, args);
    if (!j) return -1;
    char *p;
    Py_ssize_t n;
    int r = PyBytes_AsStringAndSize(j, &p, &n);
    if (!r && n >= 2 && p[n - 1] == '}') {
        r = has ? put(b, p, n)
                : (put(b, p, n - 1) || PUT_LIT(b, ",\"step\":") || put_obj(b, step) ||
                   PUT_LIT(b, "}"));
        r = r ? -1 : 1;
    } else if (!r) {
        r = 0;
    }
    Py_DECREF(j);
    return r;
}

/* The rest of an X line after its head: its ts and dur (relative ns), its args with the step and
 * the closing brace. 1 written, 0 args not plain (see put_span_args), -1 error. */
int put_x_rest(Buf *b, long long t0, long long t1, PyObject *dumps, PyObject *args,
               PyObject *step) {
    if (put_ll(b, t0) || PUT_LIT(b, "e-3,\"dur\":") || put_ll(b, t1 - t0) ||
        PUT_LIT(b, "e-3,\"args\":"))
        return -1;
    int r = put_span_args(b, dumps, args, step);
    return r == 1 && PUT_LIT(b, "}") ? -1 : r;
}

/* The rest of a counter line after its head: its ts (relative ns) and its value (an int). */
int put_c_rest(Buf *b, long long t, PyObject *value) {
    return put_ll(b, t) || PUT_LIT(b, "e-3,\"args\":{\"value\":") || put_obj(b, value) ||
           PUT_LIT(b, "}}") ? -1 : 1;
}

/* One deferred record written by C: 1 written, 0 not (the caller uses the Python formatter; ``b``
 * is then restored by the caller), -1 error. */
int put_record(Buf *b, PyObject *r, PyObject *heads, PyObject *make, PyObject *names,
               PyObject *make_name, PyObject *dumps, PyObject *counter_cat, PyObject *zero) {
    Py_ssize_t n = PyTuple_GET_SIZE(r);
    if (n < 1 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(r, 0))) return 0;
    PyObject *kind = PyTuple_GET_ITEM(r, 0), *h = NULL;
    int res = -1;
    if (n == 4 && PyUnicode_Compare(kind, s_C) == 0) {             /* (C, name, t, value) */
        PyObject *t = PyTuple_GET_ITEM(r, 2), *v = PyTuple_GET_ITEM(r, 3);
        if (!is_int(t) || !is_int(v)) return 0;
        long long tv = PyLong_AsLongLong(t);
        if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
        if (!(h = head_of(heads, make, s_C, zero, PyTuple_GET_ITEM(r, 1), counter_cat))) return -1;
        res = put_obj(b, h) ? -1 : put_c_rest(b, tv, v);
    } else if (n == 9 && PyUnicode_Compare(kind, s_X) == 0) {      /* (X, name, cat, tid, t0, t1, step, args, extra) */
        PyObject *t0 = PyTuple_GET_ITEM(r, 4), *t1 = PyTuple_GET_ITEM(r, 5),
                 *step = PyTuple_GET_ITEM(r, 6);
        if (PyTuple_GET_ITEM(r, 8) != Py_None || !is_int(t0) || !is_int(t1) || !is_int(step))
            return 0;
        long long a = PyLong_AsLongLong(t0), z = PyLong_AsLongLong(t1);
        if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
        if (!(h = head_of(heads, make, s_X, PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 1),
                          PyTuple_GET_ITEM(r, 2))))
            return -1;
        res = put_obj(b, h) ? -1 : put_x_rest(b, a, z, dumps, PyTuple_GET_ITEM(r, 7), step);
    } else if (n == 8 && PyUnicode_CompareWithASCIIString(kind, "S") == 0) {
        /* (S, name, cat, tid, tensor, t0, t1, step): a span about one tensor */
        PyObject *tensor = PyTuple_GET_ITEM(r, 4), *t0 = PyTuple_GET_ITEM(r, 5),
                 *t1 = PyTuple_GET_ITEM(r, 6), *step = PyTuple_GET_ITEM(r, 7), *j;
        if (!PyUnicode_CheckExact(tensor) || !is_int(t0) || !is_int(t1) || !is_int(step)) return 0;
        long long a = PyLong_AsLongLong(t0), z = PyLong_AsLongLong(t1);
        if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
        if (!(h = head_of(heads, make, s_X, PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 1),
                          PyTuple_GET_ITEM(r, 2))))
            return -1;
        j = PyDict_GetItemWithError(names, tensor);
        if (j) Py_INCREF(j);
        else if (PyErr_Occurred() || !(j = PyObject_CallOneArg(make_name, tensor))) goto done;
        res = (put_obj(b, h) || put_ll(b, a) || PUT_LIT(b, "e-3,\"dur\":") || put_ll(b, z - a) ||
               PUT_LIT(b, "e-3,\"args\":{\"tensor\":") || put_obj(b, j) ||
               PUT_LIT(b, ",\"step\":") || put_obj(b, step) || PUT_LIT(b, "}}")) ? -1 : 1;
        Py_DECREF(j);
    } else {
        return 0;
    }
done:
    Py_XDECREF(h);
    return res;
}

static PyObject *chunk(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *records, *heads, *make, *names, *make_name, *dumps, *fallback, *counter_cat;
    if (!PyArg_ParseTuple(args, "OO!OO!OOOU", &records, &PyDict_Type, &heads, &make, &PyDict_Type,
                          &names, &make_name, &dumps, &fallback, &counter_cat))
        return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (!seq) return NULL;
    PyObject *zero = PyLong_FromLong(0);
    if (!zero) { Py_DECREF(seq); return NULL; }
    Buf b = {0};
    long long lines = 0;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (sep(&b)) goto fail;
        lines++;
        if (PyUnicode_CheckExact(r)) {   /* a batch of lines: count the ones after its first */
            Py_ssize_t at = b.len;
            if (put_obj(&b, r)) goto fail;
            for (const char *p = b.p + at, *end = b.p + b.len;
                 (p = memchr(p, '\n', end - p)) != NULL; p++)
                lines++;
            continue;
        }
        Py_ssize_t mark = b.len;
        int ok = PyTuple_CheckExact(r)
                     ? put_record(&b, r, heads, make, names, make_name, dumps, counter_cat, zero)
                     : 0;
        if (ok < 0) goto fail;
        if (ok == 0) {   /* anything unusual: the Python formatter */
            b.len = mark;
            PyObject *line = PyObject_CallOneArg(fallback, r);
            if (!line) goto fail;
            int bad = !PyUnicode_Check(line) || put_obj(&b, line);
            Py_DECREF(line);
            if (bad) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fallback must return str");
                goto fail;
            }
        }
    }
    Py_DECREF(seq);
    Py_DECREF(zero);
    PyObject *out = PyBytes_FromStringAndSize(b.p ? b.p : "", b.len);
    PyMem_Free(b.p);
    return out ? Py_BuildValue("(NL)", out, lines) : NULL;
fail:
    Py_DECREF(seq);
    Py_DECREF(zero);
    PyMem_Free(b.p);
    return NULL;
}

static PyMethodDef methods[] = {
    {"begins", begins, METH_VARARGS,
     "begins(rec, cache, make, opened, ops, base) -> (text, n, others)"},
    {"ends", ends, METH_VARARGS,
     "ends(rec, cache, make, opened, ops, base, t_done, extra) -> (text, events, others)"},
    {"ready", ready, METH_VARARGS, "ready(names, make_name, reqs, head, t, step) -> (text, lines)"},
    {"ready_held", ready_held, METH_VARARGS,
     "ready_held(names, make_name, held, head, base, step) -> (text, lines)"},
    {"chunk", chunk, METH_VARARGS,
     "chunk(records, heads, make_head, names, make_name, dumps, fallback, counter_cat) -> "
     "(bytes, lines)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "tracer._oplines",
                                    .m_doc = "C versions of tracer.op_lines_py (same text).",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__oplines(void) {
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_name, "name"}, {&s_stamp, "stamp"}, {&s_op_type, "op_type"}, {&s_nbytes, "nbytes"},
        {&s_dtype, "dtype"}, {&s_shape, "shape"}, {&s_reduce_op, "reduce_op"},
        {&s_process_set, "process_set"}, {&s_rank, "rank"},
        {&s_submit_ns, "submit_ns"}, {&s_step, "step"}, {&s_X, "X"}, {&s_C, "C"},
        {&s_acquire, "acquire"}, {&s_release, "release"}, {&s_append, "append"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return NULL;
    if (PyType_Ready(&CompletionsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddObjectRef(m, "Completions", (PyObject *)&CompletionsType) < 0 ||
              spans_add(m) < 0 || stamp_add(m) < 0 || lines_add(m) < 0 || note_add(m) < 0))
        Py_CLEAR(m);
    return m;
}
