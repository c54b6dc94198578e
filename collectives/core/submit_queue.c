/* SubmitQueue: admission, the submit queue, the ops in flight and their completion.
 *
 * A user's thread admits entries (``admit``: a Handle each, the duplicate-name check, the tracer's
 * stamp, the in-flight table, the queue) and the engine thread takes them (``take``), sleeping on
 * ``seq`` (a futex word bumped by every admission) with the GIL released while there is nothing to
 * take. ``complete`` finishes ops: out of the in-flight table, their lifecycles to the recorder
 * that stamped them, then their handles (a finished op's end is recorded before anyone sees it).
 * Every method runs with the GIL held, which orders them against each other.
 */
#include "core.h"
#include "structmember.h"

typedef struct {
    PyObject_HEAD
    PyObject *queue;      /* list: admitted, not yet taken */
    PyObject *inflight;   /* dict name -> entry: submitted, not finished (the tracer reads it) */
    PyObject *control;    /* op types never stamped (control ops) */
    PyObject *refuse_type, *refuse_msg;   /* set once closed: admit raises refuse_type(msg) */
    long long bytes;      /* bytes of the ops in flight */
    int rank;             /* this process's rank (for messages) */
    int held;             /* inside ``with queue:``: the engine takes nothing */
    atomic_int seq, sleeping;
} SubmitQueue;

/* The recorder that stamped last, while ops it stamped may be in flight: once it is no longer the
 * current recorder it was closed when replaced, and a closed recorder writes no ends, so
 * completions stop looking for stamps (until the next op is stamped). Process-wide, as stamps are. */
static PyObject *last_stamper;

static int sq_init(SubmitQueue *q, PyObject *args, PyObject *kw) {
    static char *kws[] = {"control_ops", "rank", NULL};
    PyObject *control;
    int rank = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i:SubmitQueue", kws, &control, &rank)) return -1;
    q->rank = rank;
    Py_XSETREF(q->control, PyFrozenSet_New(control));
    Py_XSETREF(q->queue, PyList_New(0));
    Py_XSETREF(q->inflight, PyDict_New());
    if (!q->control || !q->queue || !q->inflight) return -1;
    q->bytes = 0;
    atomic_init(&q->seq, 0);
    atomic_init(&q->sleeping, 0);
    return 0;
}

static int sq_traverse(SubmitQueue *q, visitproc visit, void *arg) {
    Py_VISIT(q->queue);
    Py_VISIT(q->inflight);
    return 0;
}

static int sq_clear(SubmitQueue *q) {
    Py_CLEAR(q->queue);
    Py_CLEAR(q->inflight);
    return 0;
}

static void sq_dealloc(SubmitQueue *q) {
    PyObject_GC_UnTrack(q);
    sq_clear(q);
    Py_XDECREF(q->control);
    Py_XDECREF(q->refuse_type);
    Py_XDECREF(q->refuse_msg);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

static void signal_work(SubmitQueue *q) {
    atomic_fetch_add(&q->seq, 1);
    if (atomic_load(&q->sleeping)) rs_futex_wake(&q->seq);
}

static int refused(SubmitQueue *q) {
    if (!q->refuse_type) return 0;
    PyErr_SetObject(q->refuse_type, q->refuse_msg);
    return 1;
}

static long long nbytes_of(RsEntry *e) {
    return PyLong_AsLongLong(e->nbytes);
}

static int entries_only(PyObject **es, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_IS_TYPE(es[i], &rs_EntryType)) {
            PyErr_Format(PyExc_TypeError, "expected collectives.entry.Entry objects, got %.100s",
                         Py_TYPE(es[i])->tp_name);
            return -1;
        }
    return 0;
}

/* Admit ``n`` entries (each an Entry): a new Handle each into ``hs`` (new references, NULL on
 * failure), the duplicate-name check, the tracer's stamp, the in-flight table, the queue. */
static int admit_all(SubmitQueue *q, PyObject **es, Py_ssize_t n, PyObject **hs) {
    PyObject *stamp = NULL;
    for (Py_ssize_t i = 0; i < n; i++) hs[i] = NULL;
    if (entries_only(es, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        RsEntry *e = (RsEntry *)es[i];
        if (!(hs[i] = rs_handle_new(e->name))) goto fail;
        Py_XSETREF(e->handle, Py_NewRef(hs[i]));
    }
    if (refused(q)) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = ((RsEntry *)es[i])->name;
        int dup = PyDict_Contains(q->inflight, name);
        for (Py_ssize_t j = 0; !dup && j < i; j++)
            dup = PyObject_RichCompareBool(name, ((RsEntry *)es[j])->name, Py_EQ);
        if (dup < 0) goto fail;
        if (dup) {
            PyErr_Format(PyExc_ValueError, "a collective named %R is already in flight on rank "
                         "%d; wait for it first or give the new one another name", name, q->rank);
            goto fail;
        }
    }
    PyObject *rec = rs_rec->current();   /* when and under which timeline they were submitted */
    int on = rs_rec->enabled(rec);
    if (on < 0) goto fail;
    if (on) {
        if (!(stamp = Py_BuildValue("(OL)", rec, rs_rec->step(rec)))) goto fail;
        Py_XSETREF(last_stamper, Py_NewRef(rec));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        RsEntry *e = (RsEntry *)es[i];
        long long nb = nbytes_of(e);
        if (nb == -1 && PyErr_Occurred()) goto fail;
        if (stamp) {
            int control = PySet_Contains(q->control, e->op_type);
            if (control < 0) goto fail;
            if (!control) Py_XSETREF(e->stamp, Py_NewRef(stamp));
        }
        if (PyDict_SetItem(q->inflight, e->name, es[i]) < 0 || PyList_Append(q->queue, es[i]) < 0)
            goto fail;
        q->bytes += nb;
    }
    signal_work(q);
    Py_XDECREF(stamp);
    return 0;
fail:
    for (Py_ssize_t i = 0; i < n; i++) Py_CLEAR(hs[i]);
    Py_XDECREF(stamp);
    return -1;
}

/* admit(entries) -> [Handle]: submit ops (ValueError for a name already in flight) */
static PyObject *sq_admit(SubmitQueue *q, PyObject *entries) {
    PyObject *seq = PySequence_Fast(entries, "entries must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *handles = PyList_New(n);
    if (!handles || admit_all(q, PySequence_Fast_ITEMS(seq), n,
                              ((PyListObject *)handles)->ob_item) < 0)
        Py_CLEAR(handles);
    Py_DECREF(seq);
    return handles;
}

/* submit(entry, default_backend) -> Handle, or None: an allreduce of a host array prepared and
 * admitted in one call (None: left to prepare and admit) */
static PyObject *sq_submit(SubmitQueue *q, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "submit(entry, default_backend)");
        return NULL;
    }
    int r = rs_prepare_entry(a[0], a[1]);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *e = a[0], *h;
    return admit_all(q, &e, 1, &h) < 0 ? NULL : h;
}

/* take() -> the entries admitted since the last take, in order */
static PyObject *sq_take(SubmitQueue *q, PyObject *Py_UNUSED(a)) {
    if (q->held) return PyList_New(0);
    PyObject *fresh = PyList_New(0);
    if (!fresh) return NULL;
    PyObject *out = q->queue;
    q->queue = fresh;
    return out;
}

/* wait(timeout_s): the engine sleeps (GIL released) until an admission, wake() or the timeout */
static PyObject *sq_wait(SubmitQueue *q, PyObject *arg) {
    double t = PyFloat_AsDouble(arg);
    if (t == -1 && PyErr_Occurred()) return NULL;
    int seen = atomic_load(&q->seq);
    if (PyList_GET_SIZE(q->queue) > 0 && !q->held) Py_RETURN_NONE;
    atomic_store(&q->sleeping, 1);
    Py_BEGIN_ALLOW_THREADS
    if (atomic_load(&q->seq) == seen) rs_futex_wait(&q->seq, seen, t);
    Py_END_ALLOW_THREADS
    atomic_store(&q->sleeping, 0);
    Py_RETURN_NONE;
}

static PyObject *sq_wake(SubmitQueue *q, PyObject *Py_UNUSED(a)) {
    signal_work(q);
    Py_RETURN_NONE;
}

/* ops_done on the current recorder, then on the recorders that stamped the ops it returns
 * (stamped under another timeline: started or stopped since) */
static int ops_done_all(PyObject *ops, long long t, PyObject *err) {
    PyObject *others = rs_rec->ops_done(rs_rec->current(), ops, t, err);
    while (others && PyList_Check(others) && PyList_GET_SIZE(others)) {
        PyObject *st = PyObject_GetAttr(PyList_GET_ITEM(others, 0), rs_s_stamp);
        PyObject *next = NULL;
        if (st && PyTuple_Check(st) && PyTuple_GET_SIZE(st) == 2)
            next = rs_rec->ops_done(PyTuple_GET_ITEM(st, 0), others, t, err);
        else if (st)
            next = Py_NewRef(Py_None);
        Py_XDECREF(st);
        Py_DECREF(others);
        others = next;
    }
    if (!others) return -1;
    Py_DECREF(others);
    return 0;
}

/* The finished ops' lifecycles, each to the recorder that stamped it, one call per error. */
static int record_ends(PyObject *ops, PyObject *errors) {
    if (last_stamper != NULL && last_stamper != rs_rec->current()) Py_CLEAR(last_stamper);
    Py_ssize_t n = PyList_GET_SIZE(ops);
    if (!n || last_stamper == NULL) return 0;
    long long t = rs_rec->now();
    PyObject *first = PyList_GET_ITEM(errors, 0);
    Py_ssize_t same = 1;
    for (; same < n; same++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(errors, same), first, Py_EQ);
        if (eq < 0) return -1;
        if (!eq) break;
    }
    if (same == n) return ops_done_all(ops, t, first);   /* the usual case: one error (or None) */
    PyObject *by_error = PyDict_New();   /* error -> [op], in order of first appearance */
    if (!by_error) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *err = PyList_GET_ITEM(errors, i);
        PyObject *group = PyDict_GetItemWithError(by_error, err);
        if (!group) {
            if (PyErr_Occurred() || !(group = PyList_New(0)) ||
                PyDict_SetItem(by_error, err, group) < 0) {
                Py_XDECREF(group);
                Py_DECREF(by_error);
                return -1;
            }
            Py_DECREF(group);
        }
        if (PyList_Append(group, PyList_GET_ITEM(ops, i)) < 0) {
            Py_DECREF(by_error);
            return -1;
        }
    }
    PyObject *err, *group;
    Py_ssize_t pos = 0;
    while (PyDict_Next(by_error, &pos, &err, &group))
        if (ops_done_all(group, t, err) < 0) {
            Py_DECREF(by_error);
            return -1;
        }
    Py_DECREF(by_error);
    return 0;
}

/* complete(done): finish ops, ``done`` = [(entry, result, error)]; ops no longer in flight (a
 * second completion) are skipped */
static PyObject *sq_complete(SubmitQueue *q, PyObject *done) {
    PyObject *seq = PySequence_Fast(done, "done must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *ops = PyList_New(0), *results = PyList_New(0), *errors = PyList_New(0);
    if (!ops || !results || !errors) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 3 ||
            !Py_IS_TYPE(PyTuple_GET_ITEM(d, 0), &rs_EntryType)) {
            PyErr_SetString(PyExc_TypeError, "complete() takes (Entry, result, error) tuples");
            goto fail;
        }
        RsEntry *e = (RsEntry *)PyTuple_GET_ITEM(d, 0);
        PyObject *was = PyDict_GetItemWithError(q->inflight, e->name);
        if (!was) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        long long nb = PyDict_DelItem(q->inflight, e->name) < 0 ? -1 : nbytes_of(e);
        if (nb == -1 && PyErr_Occurred()) goto fail;
        q->bytes -= nb;
        if (PyList_Append(ops, (PyObject *)e) < 0 ||
            PyList_Append(results, PyTuple_GET_ITEM(d, 1)) < 0 ||
            PyList_Append(errors, PyTuple_GET_ITEM(d, 2)) < 0)
            goto fail;
    }
    if (record_ends(ops, errors) < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ops); i++) {
        RsEntry *e = (RsEntry *)PyList_GET_ITEM(ops, i);
        PyObject *h = e->handle;
        PyObject *splits = e->meta && PyDict_Check(e->meta) ?
            PyDict_GetItemWithError(e->meta, rs_s_received_splits) : NULL;
        if ((splits && PyObject_SetAttr(h, rs_s_received_splits, splits) < 0) || PyErr_Occurred() ||
            rs_handle_finish(h, PyList_GET_ITEM(results, i), PyList_GET_ITEM(errors, i)) < 0)
            goto fail;
    }
    Py_DECREF(seq);
    Py_DECREF(ops);
    Py_DECREF(results);
    Py_DECREF(errors);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    Py_XDECREF(ops);
    Py_XDECREF(results);
    Py_XDECREF(errors);
    return NULL;
}

/* refuse(exc_type, message): from now on admit raises exc_type(message) */
static PyObject *sq_refuse(SubmitQueue *q, PyObject *args) {
    PyObject *t, *msg;
    if (!PyArg_ParseTuple(args, "OO:refuse", &t, &msg)) return NULL;
    Py_XSETREF(q->refuse_type, Py_NewRef(t));
    Py_XSETREF(q->refuse_msg, Py_NewRef(msg));
    Py_RETURN_NONE;
}

/* check_open(): raise what admit would raise once refused */
static PyObject *sq_check_open(SubmitQueue *q, PyObject *Py_UNUSED(a)) {
    return refused(q) ? NULL : Py_NewRef(Py_None);
}

static PyObject *sq_pending(SubmitQueue *q, void *Py_UNUSED(c)) {
    return PyBool_FromLong(PyList_GET_SIZE(q->queue) > 0 && !q->held);
}

/* ``with queue:`` holds the engine off: what is admitted inside is taken at once after it */
static PyObject *sq_enter(SubmitQueue *q, PyObject *Py_UNUSED(a)) {
    q->held++;
    return Py_NewRef(q);
}

static PyObject *sq_exit(SubmitQueue *q, PyObject *const *a, Py_ssize_t n) {
    q->held--;
    signal_work(q);
    Py_RETURN_FALSE;
}

static PyObject *sq_bytes(SubmitQueue *q, void *Py_UNUSED(c)) {
    return PyLong_FromLongLong(q->bytes);
}

static PyMethodDef sq_methods[] = {
    {"admit", (PyCFunction)sq_admit, METH_O,
     "admit(entries) -> [Handle]: submit ops (ValueError for a name already in flight)"},
    {"submit", (PyCFunction)(void (*)(void))sq_submit, METH_FASTCALL,
     "submit(entry, default_backend) -> Handle, or None when the entry is not an allreduce of a "
     "native host array (then prepare and admit it)"},
    {"take", (PyCFunction)sq_take, METH_NOARGS, "take() -> the entries admitted since the last take"},
    {"wait", (PyCFunction)sq_wait, METH_O,
     "wait(timeout_s): sleep (GIL released) until an admission, wake() or the timeout"},
    {"wake", (PyCFunction)sq_wake, METH_NOARGS, "wake(): end the engine's wait now"},
    {"complete", (PyCFunction)sq_complete, METH_O,
     "complete(done): finish ops, done = [(entry, result, error)]"},
    {"refuse", (PyCFunction)sq_refuse, METH_VARARGS,
     "refuse(exc_type, message): from now on admit raises exc_type(message)"},
    {"check_open", (PyCFunction)sq_check_open, METH_NOARGS,
     "raise what admit would raise once refused"},
    {"__enter__", (PyCFunction)sq_enter, METH_NOARGS, "hold the engine off taking submissions"},
    {"__exit__", (PyCFunction)(void (*)(void))sq_exit, METH_FASTCALL, "let it take them"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef sq_members[] = {
    {"inflight", T_OBJECT, offsetof(SubmitQueue, inflight), READONLY,
     "name -> entry of the ops submitted and not finished"},
    {NULL}};

static PyGetSetDef sq_getset[] = {
    {"pending", (getter)sq_pending, NULL, "whether admitted entries wait to be taken", NULL},
    {"bytes_in_flight", (getter)sq_bytes, NULL, "bytes of the ops in flight", NULL},
    {NULL}};

PyTypeObject rs_SubmitQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectives._core.SubmitQueue",
    .tp_basicsize = sizeof(SubmitQueue),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "SubmitQueue(control_ops, rank=0): admission, the submit queue, the ops in flight and their "
              "completion",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sq_init,
    .tp_dealloc = (destructor)sq_dealloc,
    .tp_traverse = (traverseproc)sq_traverse,
    .tp_clear = (inquiry)sq_clear,
    .tp_methods = sq_methods,
    .tp_members = sq_members,
    .tp_getset = sq_getset,
};

/* stamped(): whether completions still look for stamped ops (module function) */
PyObject *rs_stamped(PyObject *m, PyObject *Py_UNUSED(a)) {
    return PyBool_FromLong(last_stamper != NULL);
}

/* unstamp(): completions stop looking for stamps (no op in flight is stamped: a bench knows) */
PyObject *rs_unstamp(PyObject *m, PyObject *Py_UNUSED(a)) {
    Py_CLEAR(last_stamper);
    Py_RETURN_NONE;
}

/* the C API's queue_words (core_api.h) */
int rs_queue_words(PyObject *obj, atomic_int **seq, atomic_int **sleeping) {
    if (!PyObject_TypeCheck(obj, &rs_SubmitQueueType)) {
        PyErr_SetString(PyExc_TypeError, "expected a SubmitQueue");
        return -1;
    }
    SubmitQueue *q = (SubmitQueue *)obj;
    *seq = &q->seq;
    *sleeping = &q->sleeping;
    return 0;
}
