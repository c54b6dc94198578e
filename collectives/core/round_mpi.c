/* collectives._round: the bit round's MPI calls from C, and the engine's wait between its passes
 * with the GIL released.
 *
 * Built against the mpich wheel's mpi.h and libmpi (setup.py); imported by the engine once MPI runs,
 * when mpi4py has loaded libmpi, which this module then shares. Every call is the engine thread's,
 * as every MPI call is (docs/ARCHITECTURE.md, "Invariants").
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <sched.h>
#include "core_api.h"
#include "futex.h"

static const CoreAPI *core;

/* ---- Round: one Iallreduce(BAND) of uint64 words in flight at a time ---------------------- */
typedef struct {
    PyObject_HEAD
    MPI_Comm comm;
    MPI_Request req;
    Py_buffer send, recv;
    int active, done;   /* active: posted, not yet seen complete; done: complete, not yet tested */
} Round;

static int round_init(Round *r, PyObject *args, PyObject *kw) {
    static char *kws[] = {"comm_f", NULL};
    int f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i:Round", kws, &f)) return -1;
    r->comm = MPI_Comm_f2c(f);
    r->req = MPI_REQUEST_NULL;
    return 0;
}

static void release_buffers(Round *r) {
    if (r->send.obj) PyBuffer_Release(&r->send);
    if (r->recv.obj) PyBuffer_Release(&r->recv);
}

static void round_dealloc(Round *r) {
    if (!r->active) release_buffers(r);   /* in flight (a dead job): MPI may still write there */
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int mpi_error(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, msg, &n);
    PyErr_Format(PyExc_RuntimeError, "%s failed: %.*s", what, n, msg);
    return -1;
}

/* post(send, recv): start the AND of ``send``'s words into ``recv`` (both kept until it ends) */
static PyObject *round_post(Round *r, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "post(send, recv)");
        return NULL;
    }
    if (r->active || r->done) {
        PyErr_SetString(PyExc_RuntimeError, "a round is already in flight");
        return NULL;
    }
    release_buffers(r);
    if (PyObject_GetBuffer(a[0], &r->send, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(a[1], &r->recv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&r->send);
        return NULL;
    }
    if (r->send.len != r->recv.len || r->send.len % 8) {
        release_buffers(r);
        PyErr_SetString(PyExc_ValueError, "send and recv must be the same number of 64-bit words");
        return NULL;
    }
    int rc = MPI_Iallreduce(r->send.buf, r->recv.buf, (int)(r->send.len / 8), MPI_UINT64_T,
                            MPI_BAND, r->comm, &r->req);
    if (mpi_error(rc, "MPI_Iallreduce") < 0) {
        release_buffers(r);
        return NULL;
    }
    r->active = 1;
    Py_RETURN_NONE;
}

/* 1 when the round in flight has completed (without the GIL) */
static int poll_round(Round *r) {
    if (r->done) return 1;
    if (!r->active) return 0;
    int flag = 0;
    MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
    if (flag) {
        r->active = 0;
        r->done = 1;
    }
    return flag;
}

/* test() -> bool: whether the round finished (True once per round: its result is then in recv) */
static PyObject *round_test(Round *r, PyObject *Py_UNUSED(a)) {
    if (!poll_round(r)) Py_RETURN_FALSE;
    r->done = 0;
    Py_RETURN_TRUE;
}

static PyObject *round_pending(Round *r, void *Py_UNUSED(c)) {
    return PyBool_FromLong(r->active || r->done);
}

static PyMethodDef round_methods[] = {
    {"post", (PyCFunction)(void (*)(void))round_post, METH_FASTCALL,
     "post(send, recv): start the bitwise AND of send's uint64 words into recv"},
    {"test", (PyCFunction)round_test, METH_NOARGS,
     "test() -> True once the round finished (its result is in recv)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef round_getset[] = {
    {"pending", (getter)round_pending, NULL, "posted and not yet tested finished", NULL},
    {NULL}};

static PyTypeObject RoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectives._round.Round",
    .tp_basicsize = sizeof(Round),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Round(comm_f): the bit round's Iallreduce on a communicator (its Fortran handle)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)round_init,
    .tp_dealloc = (destructor)round_dealloc,
    .tp_methods = round_methods,
    .tp_getset = round_getset,
};

/* ---- the engine's wait between passes ------------------------------------------------------ */
enum { W_TIMEOUT = 0, W_ROUND = 1, W_MESSAGE = 2, W_SUBMITTED = 3 };

/* wait(round, ctrl_f, source, tag, queue, timeout_s, pauses, spins, yields, first_sleep_s,
 *      max_sleep_s) -> (why, pauses): why it returned: 1 the round finished, 2 a message (source,
 * tag) waits on ctrl, 3 something was submitted (only while no round is in flight: one in flight
 * orders nothing new until it ends), 0 the timeout. Each check that finds nothing is a pause, as
 * in collectives.mpi_wait.Backoff: the first ``spins`` test again at once, the next ``yields``
 * yield the CPU, the others sleep (doubling to max_sleep_s; on the queue's futex while no round is
 * in flight, so that a submission ends the sleep). ``pauses`` goes on from an earlier wait's (0
 * after work). All with the GIL released. */
static PyObject *engine_wait(PyObject *m, PyObject *args) {
    PyObject *round, *queue;
    int ctrl_f, source, tag, spins, yields;
    long pauses;
    double timeout_s, first_sleep, max_sleep;
    if (!PyArg_ParseTuple(args, "OiiiOdliidd:wait", &round, &ctrl_f, &source, &tag, &queue,
                          &timeout_s, &pauses, &spins, &yields, &first_sleep, &max_sleep))
        return NULL;
    if (!PyObject_TypeCheck(round, &RoundType)) {
        PyErr_SetString(PyExc_TypeError, "expected a Round");
        return NULL;
    }
    atomic_int *seq, *sleeping;
    if (core->queue_words(queue, &seq, &sleeping) < 0) return NULL;
    Round *r = (Round *)round;
    MPI_Comm ctrl = MPI_Comm_f2c(ctrl_f);
    int seen = atomic_load(seq), why = W_TIMEOUT;
    double deadline = rs_monotonic() + timeout_s, sleep_s = first_sleep;
    for (long k = spins + yields; k < pauses && sleep_s < max_sleep; k++) sleep_s *= 2;
    if (sleep_s > max_sleep) sleep_s = max_sleep;
    long k = pauses;
    Py_BEGIN_ALLOW_THREADS
    for (;; k++) {
        if (poll_round(r)) {
            why = W_ROUND;
            break;
        }
        int flag = 0;
        MPI_Iprobe(source, tag, ctrl, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            why = W_MESSAGE;
            break;
        }
        int in_flight = r->active;
        if (!in_flight && atomic_load(seq) != seen) {
            why = W_SUBMITTED;
            break;
        }
        double now = rs_monotonic();
        if (now >= deadline) break;
        if (k < spins) continue;
        if (k < spins + yields) {
            sched_yield();
            continue;
        }
        double nap = sleep_s < deadline - now ? sleep_s : deadline - now;
        if (!in_flight) {   /* a submission ends the nap */
            atomic_store(sleeping, 1);
            if (atomic_load(seq) == seen) rs_futex_wait(seq, seen, nap);
            atomic_store(sleeping, 0);
        } else {
            struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
            nanosleep(&ts, NULL);
        }
        sleep_s = sleep_s * 2 < max_sleep ? sleep_s * 2 : max_sleep;
    }
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(il)", why, k);
}

static PyMethodDef methods[] = {
    {"wait", (PyCFunction)engine_wait, METH_VARARGS,
     "wait(round, ctrl_f, source, tag, queue, timeout_s, pauses, spins, yields, first_sleep_s, "
     "max_sleep_s) -> (why, pauses): why 1 round finished, 2 message, 3 submitted, 0 timeout "
     "(the GIL released)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "collectives._round",
                                    "The bit round's MPI calls and the engine's wait, in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__round(void) {
    if (!(core = core_api_import()) || PyType_Ready(&RoundType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Round", (PyObject *)&RoundType) < 0 ||
        PyModule_AddIntConstant(m, "ROUND", W_ROUND) < 0 ||
        PyModule_AddIntConstant(m, "MESSAGE", W_MESSAGE) < 0 ||
        PyModule_AddIntConstant(m, "SUBMITTED", W_SUBMITTED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
