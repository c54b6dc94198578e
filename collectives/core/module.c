/* collectives._core: the module, the tracer's C API and the vocabulary. */
#include "core.h"

const RecordAPI *rs_rec;
PyObject *rs_SYNCHRONIZE, *rs_CAT_FRAMEWORK, *rs_ARG_TENSOR, *rs_ARG_STEP;
int rs_TID_FRAMEWORK;
PyObject *rs_s_stamp, *rs_s_received_splits;
PyObject *rs_CollectiveError;

static PyObject *set_error_type(PyObject *m, PyObject *t) {
    Py_XSETREF(rs_CollectiveError, Py_NewRef(t));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_error_type", (PyCFunction)set_error_type, METH_O,
     "set_error_type(cls): what Handle.wait raises for a failed op (collectives.handles)"},
    {"stamped", (PyCFunction)rs_stamped, METH_NOARGS,
     "whether completions still look for ops stamped by a recorder"},
    {"unstamp", (PyCFunction)rs_unstamp, METH_NOARGS,
     "completions stop looking for stamps (when no op in flight is stamped)"},
    {"prepare_setup", (PyCFunction)(void (*)(void))rs_prepare_setup, METH_FASTCALL,
     "prepare_setup(numpy_adapter, ndarray, ReduceOp): what prepare_allreduce recognises"},
    {"prepare_allreduce", (PyCFunction)(void (*)(void))rs_prepare_allreduce, METH_FASTCALL,
     "prepare_allreduce(entry, default_backend) -> True when it filled the entry (an allreduce "
     "of a native host array), False to leave it to collectives.submit.prepare"},
    {"pack", (PyCFunction)(void (*)(void))rs_pack, METH_FASTCALL,
     "pack(buf, tensors) -> bool: the tensors one after another into buf (False: one is not "
     "C-contiguous, nothing copied)"},
    {"unpack", (PyCFunction)(void (*)(void))rs_unpack, METH_FASTCALL,
     "unpack(buf, outputs) -> bool: consecutive pieces of buf into the outputs (False: one is not "
     "C-contiguous and writable, nothing copied)"},
    {"route", (PyCFunction)(void (*)(void))rs_route, METH_FASTCALL,
     "route(entries, tables) -> what goes to the coordinator (the others wait under their cache "
     "bits, or are held for a stale bit's drop)"},
    {"put_bits", (PyCFunction)(void (*)(void))rs_put_bits, METH_FASTCALL,
     "put_bits(words, offset, bits, on): set (or clear) bits of the words from ``offset``"},
    {"bits_of", (PyCFunction)(void (*)(void))rs_bits_of, METH_FASTCALL,
     "bits_of(words, offset, count, inverted) -> the set (or clear) bit positions, ascending"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "collectives._core",
                                    "The engine's native core (collectives/core/).", -1, methods};

static int vocab(void) {
    PyObject *v = PyImport_ImportModule("tracer.vocab");
    if (!v) return -1;
    struct { PyObject **p; const char *s; } strs[] = {
        {&rs_SYNCHRONIZE, "SYNCHRONIZE"}, {&rs_CAT_FRAMEWORK, "CAT_FRAMEWORK"},
        {&rs_ARG_TENSOR, "ARG_TENSOR"}, {&rs_ARG_STEP, "ARG_STEP"}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!(*strs[i].p = PyObject_GetAttrString(v, strs[i].s))) {
            Py_DECREF(v);
            return -1;
        }
    PyObject *tid = PyObject_GetAttrString(v, "TID_FRAMEWORK");
    Py_DECREF(v);
    if (!tid) return -1;
    rs_TID_FRAMEWORK = (int)PyLong_AsLong(tid);
    Py_DECREF(tid);
    return PyErr_Occurred() ? -1 : 0;
}

PyMODINIT_FUNC PyInit__core(void) {
    if (!(rs_rec = record_api_import()) || vocab() < 0) return NULL;
    struct { PyObject **p; const char *s; } names[] = {
        {&rs_s_stamp, "stamp"}, {&rs_s_received_splits, "received_splits"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].p = PyUnicode_InternFromString(names[i].s))) return NULL;
    if (PyType_Ready(&rs_HandleType) < 0 || PyType_Ready(&rs_SubmitQueueType) < 0 ||
        rs_entry_setup() < 0 || rs_prepare_init() < 0 || rs_cache_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Handle", (PyObject *)&rs_HandleType) < 0 ||
        PyModule_AddObjectRef(m, "Entry", (PyObject *)&rs_EntryType) < 0 ||
        PyModule_AddObjectRef(m, "SubmitQueue", (PyObject *)&rs_SubmitQueueType) < 0 ||
        PyModule_AddObjectRef(m, "CacheTable", (PyObject *)&rs_CacheTableType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const CoreAPI core_api = {CORE_API_VERSION, rs_queue_words};
    PyObject *capi = PyCapsule_New((void *)&core_api, CORE_API_CAPSULE, NULL);
    if (!capi || PyModule_AddObjectRef(m, "_C_API", capi) < 0) {
        Py_XDECREF(capi);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(capi);
    return m;
}
