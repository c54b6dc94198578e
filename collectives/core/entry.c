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
static PyObject *zero, *one_f, *minus_one, *empty_tuple, *empty_str, *s_cpu;

#define N_ARGS 13
static const char *arg_names[N_ARGS] = {"name", "op_type", "tensor", "adapter", "reduce_op",
                                        "prescale", "postscale", "root", "splits", "process_set",
                                        "output", "backend", "priority"};
static PyObject *arg_strs[N_ARGS];   /* interned: a caller's keyword names are the same objects */

/* which argument a keyword names (-1: none); by identity first, then by value */
static int arg_index(PyObject *kw) {
    for (int i = 0; i < N_ARGS; i++)
        if (kw == arg_strs[i]) return i;
    for (int i = 0; i < N_ARGS; i++)
        if (PyUnicode_Check(kw) && PyUnicode_Compare(kw, arg_strs[i]) == 0) return i;
    return -1;
}

/* Entry(...): a vectorcall, so that a call with keywords neither builds a dict nor decodes the
 * keyword names (PyArg_ParseTupleAndKeywords did, ~8k instructions an entry) */
static PyObject *entry_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Py_ssize_t npos = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *v[N_ARGS] = {NULL, NULL, NULL, NULL, rs_Sum, one_f, one_f, minus_one, Py_None, zero,
                           Py_None, Py_None, zero};
    if (npos > N_ARGS) {
        PyErr_Format(PyExc_TypeError, "Entry() takes at most %d arguments (%zd given)", N_ARGS, npos);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < npos; i++) v[i] = args[i];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int i = arg_index(kw);
        if (i < 0 || i < npos) {
            PyErr_Format(PyExc_TypeError, i < 0 ? "Entry() got an unexpected keyword argument %R"
                                                : "Entry() got multiple values for argument %R", kw);
            return NULL;
        }
        v[i] = args[npos + k];
    }
    for (int i = 0; i < 4; i++)
        if (!v[i]) {
            PyErr_Format(PyExc_TypeError, "Entry() missing required argument '%s'", arg_names[i]);
            return NULL;
        }
    RsEntry *e = (RsEntry *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (!e) return NULL;
    PyObject **f[N_ARGS] = {&e->name, &e->op_type, &e->tensor, &e->adapter, &e->reduce_op,
                            &e->prescale, &e->postscale, &e->root, &e->splits, &e->process_set,
                            &e->output, &e->backend, &e->priority};
    for (int i = 0; i < N_ARGS; i++) *f[i] = Py_NewRef(v[i]);
    e->group = Py_NewRef(Py_None);
    e->handle = Py_NewRef(Py_None);
    e->stamp = Py_NewRef(Py_None);
    e->trace_key = Py_NewRef(Py_None);
    e->group_size = Py_NewRef(zero);
    e->submit_ns = Py_NewRef(zero);
    e->nbytes = Py_NewRef(zero);
    e->dtype = Py_NewRef(empty_str);
    e->shape = Py_NewRef(empty_tuple);
    e->device = Py_NewRef(s_cpu);
    return (PyObject *)e;
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
    .tp_new = PyType_GenericNew,   /* (Entry.__new__: empty fields; a call goes to the vectorcall) */
    .tp_vectorcall = entry_vectorcall,
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
    empty_str = PyUnicode_FromString("");
    s_cpu = PyUnicode_InternFromString("cpu");
    if (!rs_Sum || !zero || !one_f || !minus_one || !empty_tuple || !empty_str || !s_cpu) return -1;
    for (int i = 0; i < N_ARGS; i++)
        if (!(arg_strs[i] = PyUnicode_InternFromString(arg_names[i]))) return -1;
    return PyType_Ready(&rs_EntryType);
}
