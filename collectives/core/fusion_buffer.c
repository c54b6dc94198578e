/* The packing plan of a fused response on the host: each tensor at its offset in the fusion
 * buffer, one memcpy each, and back into in-place outputs the same way. Large copies run with the
 * GIL released. A tensor that is not C-contiguous (or not writable, for an output) is left to the
 * adapter's numpy path (False), before anything was copied.
 */
#include "core.h"
#include <string.h>

#define NOGIL_BYTES (256 * 1024)   /* below this, releasing the GIL costs more than the copy */

typedef struct {
    Py_buffer *views;
    Py_ssize_t n, got, total;
} Views;

static void views_release(Views *v) {
    for (Py_ssize_t i = 0; i < v->got; i++) PyBuffer_Release(&v->views[i]);
    PyMem_Free(v->views);
}

/* 1 when every array of ``seq`` is a C-contiguous buffer (writable when asked), 0 when one is not,
 * -1 on error */
static int views_get(Views *v, PyObject *seq, int writable) {
    v->n = PySequence_Fast_GET_SIZE(seq);
    v->got = v->total = 0;
    if (!(v->views = PyMem_Calloc(v->n ? v->n : 1, sizeof(Py_buffer)))) {
        PyErr_NoMemory();
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    for (Py_ssize_t i = 0; i < v->n; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &v->views[i], flags) < 0) {
            PyErr_Clear();
            return 0;
        }
        v->got++;
        v->total += v->views[i].len;
    }
    return 1;
}

static PyObject *copy_all(PyObject *const *a, Py_ssize_t n, int into_buf) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, into_buf ? "pack(buf, tensors)" : "unpack(buf, outputs)");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(a[0], &buf, PyBUF_C_CONTIGUOUS | (into_buf ? PyBUF_WRITABLE : 0)) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(a[1], "expected a sequence of arrays");
    if (!seq) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    Views v;
    int ok = views_get(&v, seq, !into_buf);
    PyObject *out = NULL;
    if (ok < 0) goto done;
    if (ok && v.total != buf.len) {
        PyErr_Format(PyExc_ValueError, "the fusion buffer holds %zd bytes, the tensors %zd",
                     buf.len, v.total);
        goto done;
    }
    if (ok) {
        char *p = buf.buf;
        int nogil = v.total >= NOGIL_BYTES;
        PyThreadState *ts = nogil ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < v.n; i++) {
            if (into_buf) memcpy(p, v.views[i].buf, v.views[i].len);
            else memcpy(v.views[i].buf, p, v.views[i].len);
            p += v.views[i].len;
        }
        if (nogil) PyEval_RestoreThread(ts);
    }
    out = PyBool_FromLong(ok);
done:
    views_release(&v);
    Py_DECREF(seq);
    PyBuffer_Release(&buf);
    return out;
}

/* pack(buf, tensors) -> bool: the tensors one after another into buf */
PyObject *rs_pack(PyObject *m, PyObject *const *a, Py_ssize_t n) { return copy_all(a, n, 1); }

/* unpack(buf, outputs) -> bool: consecutive pieces of buf into the outputs (in-place ops) */
PyObject *rs_unpack(PyObject *m, PyObject *const *a, Py_ssize_t n) { return copy_all(a, n, 0); }
