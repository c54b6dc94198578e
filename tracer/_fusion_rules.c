/* tracer._fusion_rules: the fusion plan, the one implementation of the rule that the runtime (its
 * native core, through tracer/fusion_api.h, and its coordinator) and the what-if replay (both
 * through tracer.fusion_rules) share.
 *
 * Higher priority first, readiness order among equals (a stable order); then greedy fusion: each
 * unit in turn takes every later unit with its key while the byte total stays within the
 * threshold; a unit that does not fit is skipped over and starts a later batch; a unit without a
 * key, or a threshold of 0, fuses nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdlib.h>
#include "fusion_api.h"

typedef struct {
    int64_t priority;
    Py_ssize_t index;
} Ranked;

static int by_priority(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static Py_ssize_t plan(const FuseUnit *u, Py_ssize_t n, int64_t threshold, Py_ssize_t *order,
                       Py_ssize_t *starts) {
    if (n <= 0) return 0;
    Py_ssize_t *left = malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (!left) return -1;
    int ranked = 0;
    for (Py_ssize_t i = 0; i < n; i++) ranked |= u[i].priority != u[0].priority;
    if (ranked) {
        Ranked *r = malloc(sizeof(Ranked) * (size_t)n);
        if (!r) {
            free(left);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) r[i] = (Ranked){u[i].priority, i};
        qsort(r, (size_t)n, sizeof(Ranked), by_priority);
        for (Py_ssize_t i = 0; i < n; i++) left[i] = r[i].index;
        free(r);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) left[i] = i;
    }
    Py_ssize_t m = n, out = 0, batches = 0;
    while (m > 0) {
        Py_ssize_t first = left[0], rest = 0;
        int64_t total = u[first].nbytes;
        starts[batches++] = out;
        order[out++] = first;
        int fuses = u[first].key >= 0 && threshold > 0;
        for (Py_ssize_t j = 1; j < m; j++) {
            Py_ssize_t k = left[j];
            if (fuses && u[k].key == u[first].key && total + u[k].nbytes <= threshold) {
                order[out++] = k;
                total += u[k].nbytes;
            } else {
                left[rest++] = k;
            }
        }
        m = rest;
    }
    free(left);
    return batches;
}

/* an int64 column from a sequence (None: ``missing`` for every unit) */
static int column(PyObject *seq, Py_ssize_t n, FuseUnit *u, size_t field, int64_t missing) {
    PyObject *fast = NULL;
    if (seq != Py_None) {
        if (!(fast = PySequence_Fast(seq, "plan() takes sequences of ints"))) return -1;
        if (PySequence_Fast_GET_SIZE(fast) != n) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "plan(): the sequences differ in length");
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = missing;
        if (fast) {
            v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(fast);
                return -1;
            }
        }
        *(int64_t *)((char *)&u[i] + field) = v;
    }
    Py_XDECREF(fast);
    return 0;
}

/* plan(priorities, keys, sizes, threshold) -> [[index, ...], ...] */
static PyObject *py_plan(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "plan(priorities, keys, sizes, threshold)");
        return NULL;
    }
    Py_ssize_t n = -1;
    for (int k = 0; k < 3 && n < 0; k++)
        if (a[k] != Py_None && (n = PyObject_Length(a[k])) < 0) return NULL;
    long long threshold = PyLong_AsLongLong(a[3]);
    if (threshold == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_TypeError, "plan() needs priorities, keys or sizes");
        return NULL;
    }
    FuseUnit *u = PyMem_Malloc(sizeof(FuseUnit) * (size_t)(n ? n : 1));
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    Py_ssize_t *starts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    PyObject *out = NULL;
    if (!u || !order || !starts) {
        PyErr_NoMemory();
        goto done;
    }
    if (column(a[0], n, u, offsetof(FuseUnit, priority), 0) < 0 ||
        column(a[1], n, u, offsetof(FuseUnit, key), -1) < 0 ||
        column(a[2], n, u, offsetof(FuseUnit, nbytes), 0) < 0)
        goto done;
    Py_ssize_t nb = plan(u, n, threshold, order, starts);
    if (nb < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(out = PyList_New(nb))) goto done;
    for (Py_ssize_t b = 0; b < nb; b++) {
        Py_ssize_t lo = starts[b], hi = b + 1 < nb ? starts[b + 1] : n;
        PyObject *batch = PyList_New(hi - lo);
        if (!batch) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, b, batch);
        for (Py_ssize_t i = lo; i < hi; i++) {
            PyObject *v = PyLong_FromSsize_t(order[i]);
            if (!v) {
                Py_CLEAR(out);
                goto done;
            }
            PyList_SET_ITEM(batch, i - lo, v);
        }
    }
done:
    PyMem_Free(u);
    PyMem_Free(order);
    PyMem_Free(starts);
    return out;
}

static PyMethodDef methods[] = {
    {"plan", (PyCFunction)(void (*)(void))py_plan, METH_FASTCALL,
     "plan(priorities, keys, sizes, threshold) -> [[index, ...], ...]: the units' batches in the "
     "order they run (priorities None: all equal; keys None: none fuse; a key < 0 never fuses)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracer._fusion_rules",
                                    "The fusion plan in C (tracer/fusion_rules.py wraps it).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fusion_rules(void) {
    static const FusionAPI api = {FUSION_API_VERSION, plan};
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *capi = PyCapsule_New((void *)&api, FUSION_API_CAPSULE, NULL);
    if (!capi || PyModule_AddObjectRef(m, "_C_API", capi) < 0) {
        Py_XDECREF(capi);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(capi);
    return m;
}
