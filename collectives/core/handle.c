/* Handle: the pending result of one submitted op.
 *
 * ``state`` is the futex word: PENDING, SLEEPING (pending, and some thread sleeps on it) or DONE.
 * The engine finishes a handle once (the first result or error stands); a waiter sleeps on the word
 * with the GIL released, so finishing wakes nobody unless somebody sleeps.
 */
#include "core.h"
#include "structmember.h"
#include <errno.h>

enum { PENDING = 0, SLEEPING = 1, DONE = 2 };

typedef struct {
    PyObject_HEAD
    PyObject *name, *result, *error, *received_splits, *weakrefs;
    atomic_int state;
} Handle;

PyObject *rs_handle_new(PyObject *name) {
    Handle *h = PyObject_GC_New(Handle, &rs_HandleType);
    if (!h) return NULL;
    h->name = Py_NewRef(name);
    h->result = h->error = h->weakrefs = NULL;
    h->received_splits = Py_NewRef(Py_None);
    atomic_init(&h->state, PENDING);
    PyObject_GC_Track(h);
    return (PyObject *)h;
}

static PyObject *handle_tp_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
    static char *kws[] = {"name", NULL};
    PyObject *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Handle", kws, &name)) return NULL;
    return rs_handle_new(name);
}

static int handle_traverse(Handle *h, visitproc visit, void *arg) {
    Py_VISIT(h->result);
    Py_VISIT(h->received_splits);
    return 0;
}

static int handle_clear(Handle *h) {
    Py_CLEAR(h->result);
    Py_CLEAR(h->received_splits);
    return 0;
}

static void handle_dealloc(Handle *h) {
    PyObject_GC_UnTrack(h);
    if (h->weakrefs) PyObject_ClearWeakRefs((PyObject *)h);
    handle_clear(h);
    Py_XDECREF(h->name);
    Py_XDECREF(h->error);
    PyObject_GC_Del(h);
}

int rs_handle_finish(PyObject *obj, PyObject *result, PyObject *error) {
    if (!PyObject_TypeCheck(obj, &rs_HandleType)) {
        PyErr_Format(PyExc_TypeError, "expected a Handle, got %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    Handle *h = (Handle *)obj;
    if (atomic_load(&h->state) == DONE) return 0;
    if (error && error != Py_None) Py_XSETREF(h->error, Py_NewRef(error));
    else Py_XSETREF(h->result, Py_NewRef(result ? result : Py_None));
    if (atomic_exchange(&h->state, DONE) == SLEEPING) rs_futex_wake(&h->state);
    return 0;
}

/* Sleep (GIL released) until done or ``timeout_s`` passed (< 0: no limit). 1 done, 0 timed out,
 * -1 an exception (a signal handler raised). */
static int sleep_until_done(Handle *h, double timeout_s) {
    double deadline = timeout_s < 0 ? 0 : rs_monotonic() + timeout_s;
    for (;;) {
        int s = atomic_load(&h->state);
        if (s == DONE) return 1;
        double left = -1;
        if (timeout_s >= 0) {
            left = deadline - rs_monotonic();
            if (left <= 0) return 0;
        }
        if (s == PENDING) {
            int expect = PENDING;
            if (!atomic_compare_exchange_strong(&h->state, &expect, SLEEPING)) continue;
        }
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = rs_futex_wait(&h->state, SLEEPING, left);
        Py_END_ALLOW_THREADS
        if (r == EINTR && PyErr_CheckSignals() < 0) return -1;   /* e.g. KeyboardInterrupt */
    }
}

/* wait(timeout=None): block (without spinning) until done; the result, or CollectiveError */
static PyObject *handle_wait(Handle *h, PyObject *args, PyObject *kw) {
    static char *kws[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kws, &timeout)) return NULL;
    if (atomic_load(&h->state) != DONE) {
        double secs = -1;
        if (timeout != Py_None) {
            secs = PyFloat_AsDouble(timeout);
            if (secs == -1 && PyErr_Occurred()) return NULL;
            if (secs < 0) secs = 0;
        }
        PyObject *rec = rs_rec->current();
        int on = rs_rec->enabled(rec);
        if (on < 0) return NULL;
        long long t0 = 0, step = 0;
        if (on) {
            Py_INCREF(rec);
            t0 = rs_rec->now();
            step = rs_rec->step(rec);
        }
        int done = sleep_until_done(h, secs);
        if (on) {   /* SYNCHRONIZE: the framework thread blocked in the wait */
            PyObject *et = NULL, *ev = NULL, *tb = NULL;
            if (done < 0) PyErr_Fetch(&et, &ev, &tb);
            PyObject *a = Py_BuildValue("{OOOL}", rs_ARG_TENSOR, h->name, rs_ARG_STEP, step);
            int bad = !a || rs_rec->complete(rec, rs_TID_FRAMEWORK, rs_SYNCHRONIZE,
                                             rs_CAT_FRAMEWORK, a, t0, rs_rec->now(), step) < 0;
            Py_XDECREF(a);
            Py_DECREF(rec);
            if (done < 0) PyErr_Restore(et, ev, tb);
            else if (bad) return NULL;
        }
        if (done < 0) return NULL;
        if (!done) {
            PyErr_Format(PyExc_TimeoutError, "collective %R not finished after %Ss", h->name,
                         timeout);
            return NULL;
        }
    }
    if (h->error) {
        PyErr_SetObject(rs_CollectiveError ? rs_CollectiveError : PyExc_RuntimeError, h->error);
        return NULL;
    }
    return Py_NewRef(h->result ? h->result : Py_None);
}

static PyObject *handle_poll(Handle *h, PyObject *Py_UNUSED(a)) {
    return PyBool_FromLong(atomic_load(&h->state) == DONE);
}

static PyObject *handle_set_result(Handle *h, PyObject *value) {
    return rs_handle_finish((PyObject *)h, value, NULL) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *handle_set_error(Handle *h, PyObject *message) {
    return rs_handle_finish((PyObject *)h, NULL, message) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *handle_get_error(Handle *h, void *Py_UNUSED(c)) {
    return Py_NewRef(h->error ? h->error : Py_None);
}

static PyMethodDef handle_methods[] = {
    {"poll", (PyCFunction)handle_poll, METH_NOARGS,
     "True when the op finished (successfully or not); never blocks."},
    {"wait", (PyCFunction)(void (*)(void))handle_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None): block (without spinning) until done; return the result or raise "
     "CollectiveError (TimeoutError past ``timeout`` seconds)."},
    {"set_result", (PyCFunction)handle_set_result, METH_O,
     "engine side: finish with a result (a handle finishes once)"},
    {"set_error", (PyCFunction)handle_set_error, METH_O,
     "engine side: finish with an error message (a handle finishes once)"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef handle_members[] = {
    {"name", T_OBJECT, offsetof(Handle, name), READONLY, "the op's name"},
    {"received_splits", T_OBJECT, offsetof(Handle, received_splits), 0,
     "alltoall: rows received from each rank"},
    {NULL}};

static PyGetSetDef handle_getset[] = {
    {"error", (getter)handle_get_error, NULL, "the error message, or None", NULL},
    {NULL}};

PyTypeObject rs_HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectives._core.Handle",
    .tp_basicsize = sizeof(Handle),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Handle(name): the pending result of one submitted op",
    .tp_new = handle_tp_new,
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_traverse = (traverseproc)handle_traverse,
    .tp_clear = (inquiry)handle_clear,
    .tp_weaklistoffset = offsetof(Handle, weakrefs),
    .tp_methods = handle_methods,
    .tp_members = handle_members,
    .tp_getset = handle_getset,
};
