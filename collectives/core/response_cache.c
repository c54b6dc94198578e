/* The response cache's table (one per process set) and the cached path's per-tensor work: the
 * lookup of a submission under its bit (``route``), and the plan of the fused responses of the
 * bits a round found ready everywhere (``plan``), through the fusion rule's one implementation
 * (tracer/fusion_api.h). collectives/response_cache.py keeps what is cold: which name gets which
 * bit, and the record (``Cached``) of what the members agreed on.
 *
 * Each bit's slot holds its record, the signature that must not change for it to answer a
 * submission (the submitted entry's op type, dtype, shape, reduce op, scale factors, device kind,
 * backend, priority and adapter, taken from the entry the members ran), its trace_key, and its
 * unit for the plan (fusion key id, bytes, priority). Every method runs with the GIL held (it
 * touches the entries); the plan itself runs on C arrays.
 */
#include "core.h"
#include "structmember.h"
#include "fusion_api.h"

enum { HIT = 0, MISS = 1, CHANGED = 2 };   /* collectives/response_cache.py's */
enum { S_OP, S_DTYPE, S_SHAPE, S_REDUCE, S_PRE, S_POST, S_DEVICE, S_BACKEND, S_PRIORITY, S_ADAPTER,
       N_SIG };

typedef struct {
    PyObject *cached;        /* the bit's Cached record; NULL while the bit holds nothing valid */
    PyObject *name, *trace_key;
    PyObject *sig[N_SIG];
    FuseUnit unit;
} Slot;

typedef struct {
    PyObject_HEAD
    Py_ssize_t capacity;
    Slot *slots;
    PyObject *bit_of;    /* dict name -> bit, for good */
    PyObject *entries;   /* dict bit -> Cached, while valid */
    PyObject *pending;   /* dict bit -> the entry submitted here waiting under it */
    PyObject *stale;     /* dict bit -> [entry] held until every member has dropped it */
    PyObject *keys;      /* dict fusion key -> its id in the plan's units */
} CacheTable;

static const FusionAPI *fusion;
static PyObject *s_allreduce;

static void slot_clear(Slot *s) {
    Py_CLEAR(s->cached);
    Py_CLEAR(s->name);
    Py_CLEAR(s->trace_key);
    for (int i = 0; i < N_SIG; i++) Py_CLEAR(s->sig[i]);
}

static int ct_init(CacheTable *t, PyObject *args, PyObject *kw) {
    static char *kws[] = {"capacity", NULL};
    Py_ssize_t cap;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n:CacheTable", kws, &cap)) return -1;
    if (cap < 0) {
        PyErr_SetString(PyExc_ValueError, "a cache's capacity cannot be negative");
        return -1;
    }
    if (t->slots) {
        PyErr_SetString(PyExc_RuntimeError, "CacheTable.__init__ called twice");
        return -1;
    }
    t->capacity = cap;
    if (!(t->slots = PyMem_Calloc(cap ? cap : 1, sizeof(Slot)))) {
        PyErr_NoMemory();
        return -1;
    }
    t->bit_of = PyDict_New();
    t->entries = PyDict_New();
    t->pending = PyDict_New();
    t->stale = PyDict_New();
    t->keys = PyDict_New();
    return t->bit_of && t->entries && t->pending && t->stale && t->keys ? 0 : -1;
}

static int ct_traverse(CacheTable *t, visitproc visit, void *arg) {
    Py_VISIT(t->bit_of);
    Py_VISIT(t->entries);
    Py_VISIT(t->pending);
    Py_VISIT(t->stale);
    Py_VISIT(t->keys);
    for (Py_ssize_t b = 0; t->slots && b < t->capacity; b++) {
        Py_VISIT(t->slots[b].cached);
        Py_VISIT(t->slots[b].trace_key);
    }
    return 0;
}

static int ct_clear(CacheTable *t) {
    Py_CLEAR(t->bit_of);
    Py_CLEAR(t->entries);
    Py_CLEAR(t->pending);
    Py_CLEAR(t->stale);
    Py_CLEAR(t->keys);
    for (Py_ssize_t b = 0; t->slots && b < t->capacity; b++) slot_clear(&t->slots[b]);
    return 0;
}

static void ct_dealloc(CacheTable *t) {
    PyObject_GC_UnTrack(t);
    ct_clear(t);
    PyMem_Free(t->slots);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int same(PyObject *a, PyObject *b) {
    return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ);
}

/* the device's kind: "cuda:1" -> "cuda" (requests carry the kind, so ranks on cuda:0 and cuda:1
 * agree); a new reference */
static PyObject *device_kind(PyObject *device) {
    if (!PyUnicode_Check(device)) return Py_NewRef(device);
    Py_ssize_t colon = PyUnicode_FindChar(device, ':', 0, PyUnicode_GET_LENGTH(device), 1);
    if (colon == -2) return NULL;
    return colon < 0 ? Py_NewRef(device) : PyUnicode_Substring(device, 0, colon);
}

/* the signature of an entry, as new references */
static int signature(PyObject *obj, PyObject **sig) {
    if (!Py_IS_TYPE(obj, &rs_EntryType)) {
        PyErr_SetString(PyExc_TypeError, "the response cache keeps collectives.entry.Entry objects");
        return -1;
    }
    RsEntry *e = (RsEntry *)obj;
    PyObject *src[N_SIG] = {e->op_type, e->dtype, e->shape, e->reduce_op, e->prescale, e->postscale,
                            NULL, e->backend, e->priority, e->adapter};
    for (int i = 0; i < N_SIG; i++) sig[i] = i == S_DEVICE ? NULL : Py_NewRef(src[i]);
    if (!(sig[S_DEVICE] = device_kind(e->device))) {
        for (int i = 0; i < N_SIG; i++) Py_CLEAR(sig[i]);
        return -1;
    }
    return 0;
}

/* 1 when the slot's signature is the entry's, 0 when it changed, -1 on error */
static int matches(const Slot *s, RsEntry *e) {
    PyObject *now[N_SIG] = {e->op_type, e->dtype, e->shape, e->reduce_op, e->prescale,
                            e->postscale, NULL, e->backend, e->priority, e->adapter};
    for (int i = 0; i < N_SIG; i++) {
        if (i == S_DEVICE) continue;
        int eq = same(s->sig[i], now[i]);
        if (eq != 1) return eq;
    }
    if (s->sig[S_DEVICE] == e->device) return 1;
    PyObject *kind = device_kind(e->device);
    int eq = kind ? same(s->sig[S_DEVICE], kind) : -1;
    Py_XDECREF(kind);
    return eq;
}

/* the slot of a valid bit for ``name`` (NULL: a miss; *bitobj then NULL too), or -1 on error */
static int find(CacheTable *t, PyObject *name, Slot **slot, PyObject **bitobj) {
    *slot = NULL;
    *bitobj = PyDict_GetItemWithError(t->bit_of, name);
    if (!*bitobj) return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t b = PyLong_AsSsize_t(*bitobj);
    if (b == -1 && PyErr_Occurred()) return -1;
    if (b >= 0 && b < t->capacity && t->slots[b].cached) *slot = &t->slots[b];
    return 0;
}

static long long int_attr(PyObject *o, const char *name) {
    PyObject *v = PyObject_GetAttrString(o, name);
    long long n = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    return n;
}

/* keep(cached, entry): ``cached`` (a Cached record) answers from now on the submissions whose
 * signature is ``entry``'s (the op this member ran, or its stand-in) */
static PyObject *ct_keep(CacheTable *t, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "keep(cached, entry)");
        return NULL;
    }
    PyObject *c = a[0];
    long long b = int_attr(c, "bit");
    if (b == -1 && PyErr_Occurred()) return NULL;
    if (b < 0 || b >= t->capacity) return PyErr_Format(PyExc_IndexError, "bit %lld outside the cache", b);
    static const char *key_fields[] = {"dtype", "reduce_op", "prescale", "postscale", "device",
                                       "backend", "adapter", "priority"};
    PyObject *sig[N_SIG], *key = PyTuple_New(8), *name = NULL, *tk = NULL, *id = NULL, *bit = NULL;
    if (!key || signature(a[1], sig) < 0) {
        Py_XDECREF(key);
        return NULL;
    }
    FuseUnit unit = {0, int_attr(c, "nbytes"), int_attr(c, "priority")};
    for (int i = 0; i < 8 && !PyErr_Occurred(); i++) {
        PyObject *v = PyObject_GetAttrString(c, key_fields[i]);
        if (v) PyTuple_SET_ITEM(key, i, v);
    }
    if (PyErr_Occurred() || !(name = PyObject_GetAttrString(c, "name")) ||
        !(tk = PyObject_GetAttrString(c, "trace_key")) || !(bit = PyLong_FromLongLong(b)))
        goto fail;
    if (!(id = PyDict_GetItemWithError(t->keys, key))) {   /* a new fusion key: the next id */
        if (PyErr_Occurred() || !(id = PyLong_FromSsize_t(PyDict_GET_SIZE(t->keys))) ||
            PyDict_SetItem(t->keys, key, id) < 0)
            goto fail;
        Py_DECREF(id);
    }
    unit.key = PyLong_AsLongLong(id);
    if (PyDict_SetItem(t->entries, bit, c) < 0) goto fail;
    Slot *s = &t->slots[b];
    slot_clear(s);
    s->cached = Py_NewRef(c);
    s->name = name;
    s->trace_key = tk;
    for (int i = 0; i < N_SIG; i++) s->sig[i] = sig[i];
    s->unit = unit;
    Py_DECREF(key);
    Py_DECREF(bit);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < N_SIG; i++) Py_XDECREF(sig[i]);
    Py_XDECREF(key);
    Py_XDECREF(name);
    Py_XDECREF(tk);
    Py_XDECREF(bit);
    return NULL;
}

/* invalidate(bit): the bit holds nothing valid until it is kept again */
static PyObject *ct_invalidate(CacheTable *t, PyObject *bitobj) {
    Py_ssize_t b = PyLong_AsSsize_t(bitobj);
    if (b == -1 && PyErr_Occurred()) return NULL;
    if (b >= 0 && b < t->capacity) slot_clear(&t->slots[b]);
    if (PyDict_DelItem(t->entries, bitobj) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) return NULL;
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

/* lookup(entry) -> (HIT, cached) | (CHANGED, the stale cached) | (MISS, None) */
static PyObject *ct_lookup(CacheTable *t, PyObject *e) {
    if (!Py_IS_TYPE(e, &rs_EntryType)) return Py_BuildValue("(iO)", MISS, Py_None);
    Slot *s;
    PyObject *bitobj;
    if (find(t, ((RsEntry *)e)->name, &s, &bitobj) < 0) return NULL;
    if (!s) return Py_BuildValue("(iO)", MISS, Py_None);
    int eq = matches(s, (RsEntry *)e);
    return eq < 0 ? NULL : Py_BuildValue("(iO)", eq ? HIT : CHANGED, s->cached);
}

static int cacheable(RsEntry *e) {
    if (e->group != Py_None) return 0;
    return e->op_type == s_allreduce ? 1 : same(e->op_type, s_allreduce);
}

/* route(entries, tables) -> what goes to the coordinator: each entry of ``entries`` that its set's
 * table (``tables``: set id -> CacheTable) answers waits under its bit (pending, its trace_key the
 * bit's), one whose request changed is held for the bit's drop (stale); the others are returned,
 * in order */
PyObject *rs_route(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (n != 2 || !PyDict_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "route(entries, tables: dict)");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(a[0], "entries must be a sequence");
    if (!seq) return NULL;
    PyObject *full = PyList_New(0);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; full && i < count; i++) {
        PyObject *obj = PySequence_Fast_GET_ITEM(seq, i), *bitobj = NULL;
        RsEntry *e = (RsEntry *)obj;
        Slot *s = NULL;
        int ok = Py_IS_TYPE(obj, &rs_EntryType) ? cacheable(e) : 0;
        PyObject *t = ok > 0 ? PyDict_GetItemWithError(a[1], e->process_set) : NULL;
        if (ok < 0 || (!t && PyErr_Occurred())) goto fail;
        if (t && !PyObject_TypeCheck(t, &rs_CacheTableType)) {
            PyErr_SetString(PyExc_TypeError, "route(): tables holds a set's CacheTable");
            goto fail;
        }
        if (t && find((CacheTable *)t, e->name, &s, &bitobj) < 0) goto fail;
        int eq = s ? matches(s, e) : 0;
        if (eq < 0) goto fail;
        if (!s) {
            if (PyList_Append(full, obj) < 0) goto fail;
        } else if (eq) {   /* a hit */
            if (PyDict_SetItem(((CacheTable *)t)->pending, bitobj, obj) < 0) goto fail;
            Py_XSETREF(e->trace_key, Py_NewRef(s->trace_key));
        } else {           /* changed: held until every member has dropped the bit */
            PyObject *held = PyDict_GetItemWithError(((CacheTable *)t)->stale, bitobj);
            if (!held) {
                if (PyErr_Occurred() || !(held = PyList_New(0)) ||
                    PyDict_SetItem(((CacheTable *)t)->stale, bitobj, held) < 0) {
                    Py_XDECREF(held);
                    goto fail;
                }
                Py_DECREF(held);
            }
            if (PyList_Append(held, obj) < 0) goto fail;
        }
    }
    Py_DECREF(seq);
    return full;
fail:
    Py_DECREF(seq);
    Py_XDECREF(full);
    return NULL;
}

/* plan(bits, threshold) -> [(cached, names, entries, nbytes, missing)]: the fused responses of the
 * ``bits`` (ready on every member) in the order every member derives (the fusion rule's), each
 * with its bits' records and names, the entries that waited here under them (taken out of
 * pending; None for one never submitted here: ``missing``) and its bytes */
static PyObject *ct_plan(CacheTable *t, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "plan(bits, threshold)");
        return NULL;
    }
    long long threshold = PyLong_AsLongLong(a[1]);
    if (threshold == -1 && PyErr_Occurred()) return NULL;
    PyObject *seq = PySequence_Fast(a[0], "bits must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(seq), k = 0, size = nb ? nb : 1;
    FuseUnit *units = PyMem_Malloc(sizeof(FuseUnit) * size);
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * size);
    Py_ssize_t *starts = PyMem_Malloc(sizeof(Py_ssize_t) * size);
    Slot **slots = PyMem_Malloc(sizeof(Slot *) * size);
    PyObject **mine = PyMem_Calloc(size, sizeof(PyObject *));   /* the entries taken (owned) */
    PyObject *out = NULL;
    if (!units || !order || !starts || !slots || !mine) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *bitobj = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t b = PyLong_AsSsize_t(bitobj);
        if (b == -1 && PyErr_Occurred()) goto done;
        if (b < 0 || b >= t->capacity || !t->slots[b].cached) continue;
        PyObject *e = PyDict_GetItemWithError(t->pending, bitobj);
        if (e) {
            mine[k] = Py_NewRef(e);
            if (PyDict_DelItem(t->pending, bitobj) < 0) goto done;
        } else if (PyErr_Occurred()) {
            goto done;
        }
        slots[k] = &t->slots[b];
        units[k++] = t->slots[b].unit;
    }
    Py_ssize_t batches = fusion->plan(units, k, threshold, order, starts);
    if (batches < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(out = PyList_New(batches))) goto done;
    for (Py_ssize_t j = 0; j < batches; j++) {
        Py_ssize_t lo = starts[j], hi = j + 1 < batches ? starts[j + 1] : k;
        PyObject *recs = PyList_New(hi - lo), *names = PyList_New(hi - lo),
                 *entries = PyList_New(hi - lo);
        long long bytes = 0;
        int missing = 0;
        if (!recs || !names || !entries) {
            Py_XDECREF(recs);
            Py_XDECREF(names);
            Py_XDECREF(entries);
            Py_CLEAR(out);
            goto done;
        }
        for (Py_ssize_t i = lo; i < hi; i++) {
            Slot *s = slots[order[i]];
            PyObject *e = mine[order[i]];
            missing |= e == NULL;
            bytes += s->unit.nbytes;
            PyList_SET_ITEM(recs, i - lo, Py_NewRef(s->cached));
            PyList_SET_ITEM(names, i - lo, Py_NewRef(s->name));
            PyList_SET_ITEM(entries, i - lo, Py_NewRef(e ? e : Py_None));
        }
        PyObject *item = Py_BuildValue("(NNNLO)", recs, names, entries, bytes,
                                       missing ? Py_True : Py_False);
        if (!item) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, j, item);
    }
done:
    for (Py_ssize_t i = 0; mine && i < nb; i++) Py_XDECREF(mine[i]);   /* (NULL past k) */
    PyMem_Free(units);
    PyMem_Free(order);
    PyMem_Free(starts);
    PyMem_Free(slots);
    PyMem_Free(mine);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef ct_methods[] = {
    {"keep", (PyCFunction)(void (*)(void))ct_keep, METH_FASTCALL,
     "keep(cached, entry): the bit's record answers submissions with the entry's signature"},
    {"invalidate", (PyCFunction)ct_invalidate, METH_O, "invalidate(bit): drop the bit's record"},
    {"lookup", (PyCFunction)ct_lookup, METH_O,
     "lookup(entry) -> (HIT, cached) | (CHANGED, the stale cached) | (MISS, None)"},
    {"plan", (PyCFunction)(void (*)(void))ct_plan, METH_FASTCALL,
     "plan(bits, threshold) -> [(cached records, names, entries, nbytes, missing)]: the fused "
     "responses of the ready bits, in the fusion rule's order"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef ct_members[] = {
    {"capacity", T_PYSSIZET, offsetof(CacheTable, capacity), READONLY, "bits at most"},
    {"bit_of", T_OBJECT, offsetof(CacheTable, bit_of), READONLY, "name -> bit, for good"},
    {"entries", T_OBJECT, offsetof(CacheTable, entries), READONLY, "bit -> Cached, while valid"},
    {"pending", T_OBJECT, offsetof(CacheTable, pending), READONLY,
     "bit -> the entry submitted here that waits under it"},
    {"stale", T_OBJECT, offsetof(CacheTable, stale), READONLY,
     "bit -> [entry] held until every member has dropped the bit"},
    {NULL}};

PyTypeObject rs_CacheTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collectives._core.CacheTable",
    .tp_basicsize = sizeof(CacheTable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "CacheTable(capacity): one process set's response cache, its bits' records and "
              "signatures, the entries pending under them; the lookup and the plan in C",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ct_init,
    .tp_dealloc = (destructor)ct_dealloc,
    .tp_traverse = (traverseproc)ct_traverse,
    .tp_clear = (inquiry)ct_clear,
    .tp_methods = ct_methods,
    .tp_members = ct_members,
};

int rs_cache_init(void) {
    if (!(fusion = fusion_api_import()) || !(s_allreduce = PyUnicode_InternFromString("ALLREDUCE")))
        return -1;
    return PyType_Ready(&rs_CacheTableType);
}
