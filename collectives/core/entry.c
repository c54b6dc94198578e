/* Entry: one submitted op as the engine sees it (framework-neutral; the adapter knows the tensor).
 *
 * A C struct with one attribute per field, so that the core reads and fills it without attribute
 * lookups, and Python code uses it as the dataclass it replaces: ``Entry(name, op_type, tensor,
 * adapter, reduce_op=Sum, prescale=1.0, postscale=1.0, root=-1, splits=None, process_set=0,
 * output=None, backend=None, priority=0)``; the other fields are filled by the engine.
 */
#include "core.h"
#include "structmember.h"

PyObject *rs_Sum;   /* collectives.ops.ReduceOp.Sum, the default reduce op */
static PyObject *zero, *one_f, *minus_one, *empty_tuple, *s_cpu;

static int entry_init(RsEntry *e, PyObject *args, PyObject *kw) {
    static char *kws[] = {"name", "op_type", "tensor", "adapter", "reduce_op", "prescale",
                          "postscale", "root", "splits", "process_set", "output", "backend",
                          "priority", NULL};
    PyObject *v[13] = {NULL, NULL, NULL, NULL, rs_Sum, one_f, one_f, minus_one, Py_None, zero,
                       Py_None, Py_None, zero};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|OOOOOOOOO:Entry", kws, &v[0], &v[1], &v[2],
                                     &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
                                     &v[11], &v[12]))
        return -1;
    PyObject **f[13] = {&e->name, &e->op_type, &e->tensor, &e->adapter, &e->reduce_op,
                        &e->prescale, &e->postscale, &e->root, &e->splits, &e->process_set,
                        &e->output, &e->backend, &e->priority};
    for (int i = 0; i < 13; i++) Py_XSETREF(*f[i], Py_NewRef(v[i]));
    PyObject **rest[] = {&e->group, &e->handle, &e->stamp, &e->trace_key};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) Py_XSETREF(*rest[i], Py_NewRef(Py_None));
    Py_XSETREF(e->group_size, Py_NewRef(zero));
    Py_XSETREF(e->submit_ns, Py_NewRef(zero));
    Py_XSETREF(e->nbytes, Py_NewRef(zero));
    Py_XSETREF(e->dtype, PyUnicode_FromString(""));
    Py_XSETREF(e->shape, Py_NewRef(empty_tuple));
    Py_XSETREF(e->device, Py_NewRef(s_cpu));
    return e->dtype ? 0 : -1;
}

#define FIELDS(X) X(name) X(op_type) X(tensor) X(adapter) X(reduce_op) X(prescale) X(postscale) \
    X(root) X(splits) X(process_set) X(output) X(backend) X(priority) X(group) X(group_size)      \
    X(handle) X(submit_ns) X(nbytes) X(dtype) X(shape) X(device) X(meta) X(stamp) X(trace_key)

static int entry_traverse(RsEntry *e, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(e->f);
    FIELDS(VISIT)
    return 0;
}

static int entry_clear(RsEntry *e) {
#define CLEAR(f) Py_CLEAR(e->f);
    FIELDS(CLEAR)
    return 0;
}

static void entry_dealloc(RsEntry *e) {
    PyObject_GC_UnTrack(e);
    entry_clear(e);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* ``meta``: a dict made on first use (most ops never need one beyond what the core sets) */
static PyObject *entry_get_meta(RsEntry *e, void *Py_UNUSED(c)) {
    if (!e->meta && !(e->meta = PyDict_New())) return NULL;
    return Py_NewRef(e->meta);
}

static int entry_set_meta(RsEntry *e, PyObject *v, void *Py_UNUSED(c)) {
    Py_XSETREF(e->meta, Py_XNewRef(v));
    return 0;
}

static PyObject *entry_repr(RsEntry *e) {
    return PyUnicode_FromFormat("Entry(name=%R, op_type=%R, dtype=%R, shape=%R, process_set=%R)",
                                e->name, e->op_type, e->dtype, e->shape, e->process_set);
}

#define MEMBER(f) {#f, T_OBJECT, offsetof(RsEntry, f), 0, NULL},
static PyMemberDef entry_members[] = {
    MEMBER(name) MEMBER(op_type) MEMBER(tensor) MEMBER(adapter) MEMBER(reduce_op)
    MEMBER(prescale) MEMBER(postscale) MEMBER(root) MEMBER(splits) MEMBER(process_set)
    MEMBER(output) MEMBER(backend) MEMBER(priority) MEMBER(group) MEMBER(group_size)
    MEMBER(handle) MEMBER(submit_ns) MEMBER(nbytes) MEMBER(dtype) MEMBER(shape) MEMBER(device)
    MEMBER(stamp) MEMBER(trace_key)
    {NULL}};

static PyGetSetDef entry_getset[] = {
    {"meta", (getter)entry_get_meta, (setter)entry_set_meta,
     "per-op facts for the executor and the adapters (numel, out_shape, ...)", NULL},
    {NULL}};

PyTypeObject rs_EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectives._core.Entry",
    .tp_basicsize = sizeof(RsEntry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Entry(name, op_type, tensor, adapter, reduce_op=Sum, prescale=1.0, postscale=1.0, "
              "root=-1, splits=None, process_set=0, output=None, backend=None, priority=0): one "
              "submitted op as the engine sees it (tensor and output are only the adapter's)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)entry_init,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_repr = (reprfunc)entry_repr,
    .tp_members = entry_members,
    .tp_getset = entry_getset,
};

int rs_entry_setup(void) {
    PyObject *ops = PyImport_ImportModule("collectives.ops");
    if (!ops) return -1;
    rs_Sum = PyObject_GetAttrString(ops, "Sum");
    Py_DECREF(ops);
    zero = PyLong_FromLong(0);
    one_f = PyFloat_FromDouble(1.0);
    minus_one = PyLong_FromLong(-1);
    empty_tuple = PyTuple_New(0);
    s_cpu = PyUnicode_InternFromString("cpu");
    if (!rs_Sum || !zero || !one_f || !minus_one || !empty_tuple || !s_cpu) return -1;
    return PyType_Ready(&rs_EntryType);
}
