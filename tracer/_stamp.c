/* The runtime's stamp of a submitted op in C: ``Stamper`` of tracer/op_lines_py.py (the same
 * behaviour; a test checks the two side by side). Part of the tracer._oplines module.
 *
 * Why C: the runtime stamps every op it admits, one call per gradient in a training step, on the
 * user's thread in the middle of its backward pass. As a Python function (two frames: the stamp
 * and get_recorder) that cost ~0.6 µs per op there, ~75 µs per rank and step in the demo. Here it
 * is a dict read, two attribute reads and, on most calls, no allocation.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *state;   /* the dict that holds the process-wide recorder under "_recorder" */
    PyObject *last;    /* the last stamp given, (recorder, step), or None */
} Stamper;

static PyObject *s_recorder, *s_enabled_attr, *s_step_attr;

static int stamper_traverse(Stamper *s, visitproc visit, void *arg) {
    Py_VISIT(s->state);
    Py_VISIT(s->last);
    return 0;
}

static int stamper_clear(Stamper *s) {
    Py_CLEAR(s->state);
    Py_CLEAR(s->last);
    return 0;
}

static void stamper_dealloc(Stamper *s) {
    PyObject_GC_UnTrack(s);
    stamper_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int stamper_init(Stamper *s, PyObject *args, PyObject *kw) {
    PyObject *state;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Stamper takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!", &PyDict_Type, &state)) return -1;
    Py_INCREF(state);
    Py_XSETREF(s->state, state);
    Py_XSETREF(s->last, Py_NewRef(Py_None));
    return 0;
}

/* The current recorder (borrowed), NULL with an error set when the state holds none. */
static PyObject *current(Stamper *s) {
    if (!s->state) {   /* made by __new__ alone */
        PyErr_SetString(PyExc_RuntimeError, "Stamper not initialised");
        return NULL;
    }
    PyObject *rec = PyDict_GetItemWithError(s->state, s_recorder);
    if (!rec && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "no recorder installed");
    return rec;
}

/* stamper(): (recorder, step) for ops submitted now, or None when the recorder is not enabled. */
static PyObject *stamper_call(Stamper *s, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "a stamper takes no arguments");
        return NULL;
    }
    PyObject *rec = current(s);
    if (!rec) return NULL;
    Py_INCREF(rec);   /* attribute reads may run code that replaces it */
    PyObject *res = NULL, *step = NULL, *en = PyObject_GetAttr(rec, s_enabled_attr);
    int on = en ? PyObject_IsTrue(en) : -1;
    Py_XDECREF(en);
    if (on <= 0) {
        if (on == 0) res = Py_NewRef(Py_None);
        goto done;
    }
    if (!(step = PyObject_GetAttr(rec, s_step_attr))) goto done;
    PyObject *last = s->last;   /* NULL once deleted */
    if (last && PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 2 &&
        PyTuple_GET_ITEM(last, 0) == rec) {
        PyObject *was = PyTuple_GET_ITEM(last, 1);
        int same = was == step ? 1 : PyObject_RichCompareBool(was, step, Py_EQ);
        if (same < 0) goto done;
        if (same) { res = Py_NewRef(last); goto done; }
    }
    if ((res = PyTuple_Pack(2, rec, step))) Py_XSETREF(s->last, Py_NewRef(res));
done:
    Py_XDECREF(step);
    Py_DECREF(rec);
    return res;
}

/* settle(): forget the last stamp once its recorder is no longer the current one. */
static PyObject *stamper_settle(Stamper *s, PyObject *Py_UNUSED(noargs)) {
    PyObject *last = s->last;
    if (last == Py_None) Py_RETURN_NONE;
    PyObject *rec = current(s);
    if (!rec) return NULL;
    if (!(last && PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 2 &&
          PyTuple_GET_ITEM(last, 0) == rec))
        Py_XSETREF(s->last, Py_NewRef(Py_None));
    Py_RETURN_NONE;
}

static PyMethodDef stamper_methods[] = {
    {"settle", (PyCFunction)stamper_settle, METH_NOARGS,
     "Forget the last stamp once its recorder is no longer the current one."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef stamper_members[] = {
    {"last", T_OBJECT_EX, offsetof(Stamper, last), 0,
     "The last stamp given, (recorder, step), or None (writable: None forgets it)."},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject StamperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._oplines.Stamper",
    .tp_basicsize = sizeof(Stamper),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Stamper(state): calls give (recorder, step) for ops submitted now, or None.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)stamper_init,
    .tp_dealloc = (destructor)stamper_dealloc,
    .tp_traverse = (traverseproc)stamper_traverse,
    .tp_clear = (inquiry)stamper_clear,
    .tp_call = (ternaryfunc)stamper_call,
    .tp_methods = stamper_methods,
    .tp_members = stamper_members,
};

int stamp_add(PyObject *m) {
    if (!(s_recorder = PyUnicode_InternFromString("_recorder")) ||
        !(s_enabled_attr = PyUnicode_InternFromString("enabled")) ||
        !(s_step_attr = PyUnicode_InternFromString("step")))
        return -1;
    if (PyType_Ready(&StamperType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Stamper", (PyObject *)&StamperType);
}
