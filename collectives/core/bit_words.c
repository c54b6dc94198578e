/* The bit rounds' words: a rank's cache bits into its vector, the AND-reduced result back into bit
 * positions (collectives/bit_rounds.py has the layout). Per bit this is a few instructions here,
 * against a numpy scalar operation each in Python.
 */
#include "core.h"

typedef unsigned long long u64;

static int words_of(PyObject *obj, Py_buffer *view, int writable) {
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                               : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != 8 || view->len % 8) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "expected a buffer of 64-bit words");
        return -1;
    }
    return 0;
}

/* put_bits(words, offset, bits, on): set (on) or clear the bits ``bits`` (ints: bit i of the
 * block of words starting at word ``offset``) */
PyObject *rs_put_bits(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "put_bits(words, offset, bits, on)");
        return NULL;
    }
    Py_buffer view;
    if (words_of(a[0], &view, 1) < 0) return NULL;
    u64 *w = view.buf;
    Py_ssize_t nw = view.len / 8, off = PyLong_AsSsize_t(a[1]);
    int on = PyObject_IsTrue(a[3]);
    PyObject *it = (off < 0 && PyErr_Occurred()) || on < 0 ? NULL : PyObject_GetIter(a[2]);
    if (!it) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *item;
    while ((item = PyIter_Next(it))) {
        Py_ssize_t bit = PyLong_AsSsize_t(item);
        Py_DECREF(item);
        if (bit < 0 || off + bit / 64 >= nw) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_IndexError, "bit %zd outside the words", bit);
            break;
        }
        if (on) w[off + bit / 64] |= 1ULL << (bit % 64);
        else w[off + bit / 64] &= ~(1ULL << (bit % 64));
    }
    Py_DECREF(it);
    PyBuffer_Release(&view);
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* bits_of(words, offset, count, inverted): the positions of the set bits (of the clear ones when
 * ``inverted``) in words[offset:offset + count], ascending */
PyObject *rs_bits_of(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "bits_of(words, offset, count, inverted)");
        return NULL;
    }
    Py_buffer view;
    if (words_of(a[0], &view, 0) < 0) return NULL;
    const u64 *w = view.buf;
    Py_ssize_t off = PyLong_AsSsize_t(a[1]), cnt = PyLong_AsSsize_t(a[2]);
    int inv = PyObject_IsTrue(a[3]);
    PyObject *out = NULL;
    if (PyErr_Occurred() || inv < 0) goto done;
    if (off < 0 || cnt < 0 || off + cnt > view.len / 8) {
        PyErr_SetString(PyExc_IndexError, "words outside the buffer");
        goto done;
    }
    if (!(out = PyList_New(0))) goto done;
    for (Py_ssize_t k = 0; k < cnt; k++) {
        u64 x = inv ? ~w[off + k] : w[off + k];
        while (x) {
            int b = __builtin_ctzll(x);
            x &= x - 1;
            PyObject *v = PyLong_FromSsize_t(k * 64 + b);
            if (!v || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(out);
                goto done;
            }
            Py_DECREF(v);
        }
    }
done:
    PyBuffer_Release(&view);
    return out;
}
