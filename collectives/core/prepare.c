/* The submit-time fill of an allreduce of a host (numpy) array: what collectives/submit.py's
 * prepare does, for the op every training step submits per gradient. Anything else, and anything
 * it would have to reject, is left to prepare (it returns False before touching the entry).
 */
#include "core.h"

static PyObject *numpy_adapter, *ndarray_type, *reduce_op_type, *s_allreduce, *s_numel, *s_value,
    *s_cpu;
static PyObject *dtype_names[128];   /* buffer format character -> numpy dtype name */

/* prepare_setup(numpy_adapter, ndarray_type, reduce_op_type): what the fast path recognises */
PyObject *rs_prepare_setup(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "prepare_setup(numpy_adapter, ndarray, ReduceOp)");
        return NULL;
    }
    Py_XSETREF(numpy_adapter, Py_NewRef(a[0]));
    Py_XSETREF(ndarray_type, Py_NewRef(a[1]));
    Py_XSETREF(reduce_op_type, Py_NewRef(a[2]));
    Py_RETURN_NONE;
}

int rs_prepare_init(void) {
    static const struct { char c; const char *name; } fmt[] = {
        {'e', "float16"}, {'f', "float32"}, {'d', "float64"}, {'b', "int8"}, {'h', "int16"},
        {'i', "int32"}, {'l', "int64"}, {'q', "int64"}, {'B', "uint8"}};
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++)
        if (!(dtype_names[(int)fmt[i].c] = PyUnicode_InternFromString(fmt[i].name))) return -1;
    s_allreduce = PyUnicode_InternFromString("ALLREDUCE");
    s_numel = PyUnicode_InternFromString("numel");
    s_value = PyUnicode_InternFromString("_value_");   /* (``value`` is a Python property) */
    s_cpu = PyUnicode_InternFromString("cpu");
    return s_allreduce && s_numel && s_value && s_cpu ? 0 : -1;
}

/* The numpy dtype name of a native-order buffer format this runtime carries, else NULL. */
static PyObject *dtype_of(const char *f) {
    if (!f) return dtype_names['B'];
    if (*f == '@' || *f == '=' || *f == '<') f++;   /* '<' is native here (x86-64, aarch64) */
    if (!f[0] || f[1] || (unsigned char)f[0] >= 128) return NULL;
    return dtype_names[(int)f[0]];
}

/* Fill ``obj`` when it is an allreduce of a native host array: 1 filled, 0 left to prepare (the
 * entry untouched), -1 an exception. */
int rs_prepare_entry(PyObject *obj, PyObject *default_backend) {
    if (!numpy_adapter || !Py_IS_TYPE(obj, &rs_EntryType)) return 0;
    RsEntry *e = (RsEntry *)obj;
    if (e->adapter != numpy_adapter || !Py_IS_TYPE(e->tensor, (PyTypeObject *)ndarray_type) ||
        !Py_IS_TYPE(e->reduce_op, (PyTypeObject *)reduce_op_type) ||
        (e->op_type != s_allreduce && !(PyUnicode_Check(e->op_type) &&
                                        PyUnicode_Compare(e->op_type, s_allreduce) == 0)))
        return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(e->tensor, &view, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return 0;
    }
    PyObject *dtype = dtype_of(view.format), *shape = NULL, *key = NULL, *op = NULL;
    PyObject *nbytes = NULL, *numel = NULL, *sub = NULL;
    int ok = 0;
    if (!dtype) goto out;
    if (!(shape = PyTuple_New(view.ndim))) goto out;
    Py_ssize_t count = 1;
    for (int i = 0; i < view.ndim; i++) {
        count *= view.shape[i];
        PyObject *d = PyLong_FromSsize_t(view.shape[i]);
        if (!d) goto out;
        PyTuple_SET_ITEM(shape, i, d);
    }
    if (e->output != Py_None && e->output != e->tensor) {   /* an output of another shape: prepare */
        if (!Py_IS_TYPE(e->output, (PyTypeObject *)ndarray_type)) goto out;
        PyObject *oshape = PyObject_GetAttrString(e->output, "shape");
        int same = oshape ? PyObject_RichCompareBool(oshape, shape, Py_EQ) : -1;
        Py_XDECREF(oshape);
        if (same != 1) goto out;
    }
    if (!(op = PyObject_GetAttr(e->reduce_op, s_value)) || !(nbytes = PyLong_FromSsize_t(view.len)) ||
        !(numel = PyLong_FromSsize_t(count)) || !(sub = PyLong_FromLongLong(rs_rec->now())))
        goto out;
    if (!(key = PyTuple_Pack(8, e->name, e->op_type, nbytes, dtype, shape, op, e->process_set,
                             e->priority)))
        goto out;
    if (!e->meta && !(e->meta = PyDict_New())) goto out;
    if (PyDict_SetItem(e->meta, s_numel, numel) < 0) goto out;
    Py_XSETREF(e->submit_ns, Py_NewRef(sub));
    Py_XSETREF(e->dtype, Py_NewRef(dtype));
    Py_XSETREF(e->shape, Py_NewRef(shape));
    Py_XSETREF(e->nbytes, Py_NewRef(nbytes));
    Py_XSETREF(e->device, Py_NewRef(s_cpu));
    if (e->backend == Py_None) Py_XSETREF(e->backend, Py_NewRef(default_backend));
    Py_XSETREF(e->trace_key, Py_NewRef(key));
    ok = 1;
out:
    PyBuffer_Release(&view);
    Py_XDECREF(shape);
    Py_XDECREF(key);
    Py_XDECREF(op);
    Py_XDECREF(nbytes);
    Py_XDECREF(numel);
    Py_XDECREF(sub);
    return PyErr_Occurred() ? -1 : ok;
}

/* prepare_allreduce(entry, default_backend) -> bool: filled (True), or left to prepare (False) */
PyObject *rs_prepare_allreduce(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "prepare_allreduce(entry, default_backend)");
        return NULL;
    }
    int r = rs_prepare_entry(a[0], a[1]);
    return r < 0 ? NULL : PyBool_FromLong(r);
}
