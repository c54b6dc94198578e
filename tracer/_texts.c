/* The engine's completions' table of tensors' constant text, flat in C. Part of tracer._oplines.
 *
 * Why: a completion runs on caches the training step has swept, and finding a tensor's text in the
 * line builder's dict, then checking its key tuple against the op, chases ~10 objects one after the
 * other (dict slot, text tuple, key tuple, its items, two strings). Here one open-addressing slot
 * holds the name's hash, the key's values (the small ones inline) and the X line's two texts, in
 * adjacent memory: a hit costs the slot and the op's own attributes. The dict stays the reference:
 * a miss goes through it (and ``make``), and the table forgets everything when the line builder's
 * generation changes (a new file part, or its cache emptied), so the thread names a new part needs
 * are still made on the next line of each tensor.
 */
#include "_buf.h"
#include "_texts.h"

enum { KEY, ARGS, HX };   /* tracer/op_lines_py.py's slots of a text tuple */

static void slot_clear(TText *s) {
    Py_CLEAR(s->name);
    Py_CLEAR(s->c);
}

void texts_clear(TTable *t) {
    for (Py_ssize_t i = 0; i < t->cap; i++) slot_clear(&t->slots[i]);
    t->used = 0;
}

void texts_free(TTable *t) {
    texts_clear(t);
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->cap = 0;
    Py_CLEAR(t->gen_seen);
}

/* Whether the line builder's generation (``gen[0]``) is still the one the table was filled under;
 * when not, the table is emptied and follows the new one. The object is held, so a new value is
 * never a reused address. */
static void follow_gen(TTable *t, PyObject *gen) {
    PyObject *g = PyList_GET_ITEM(gen, 0);
    if (g == t->gen_seen) return;
    texts_clear(t);
    Py_INCREF(g);
    Py_XSETREF(t->gen_seen, g);
}

/* The slot of ``name`` (hash ``h``), or the empty one where it would go; NULL on error. */
static TText *probe(TTable *t, PyObject *name, Py_hash_t h) {
    size_t mask = (size_t)t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        TText *s = &t->slots[i];
        if (!s->name || s->name == name) return s;
        if (s->hash == h) {
            int eq = PyObject_RichCompareBool(s->name, name, Py_EQ);
            if (eq < 0) return NULL;
            if (eq) return s;
        }
    }
}

/* Whether the op's key ``vals`` (op_type, nbytes, dtype, shape, reduce_op, process_set) is the
 * slot's: 1 yes, 0 no, -1 error. */
static int key_matches(TText *s, PyObject **vals) {
    for (int i = 0; i < TKEY; i++) {
        PyObject *v = vals[i];
        if (v == s->key[i]) continue;
        if (i == 1 && s->nb_ok && PyLong_CheckExact(v)) {
            int overflow = 0;
            long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (n == -1 && PyErr_Occurred()) return -1;
            if (overflow || n != s->nbytes) return 0;
            continue;
        }
        if (i == 3 && s->ndim >= 0 && PyTuple_Check(v)) {
            if (PyTuple_GET_SIZE(v) != s->ndim) return 0;
            int inl = 1;
            for (int d = 0; inl && d < s->ndim; d++) {
                PyObject *x = PyTuple_GET_ITEM(v, d);
                if (!PyLong_CheckExact(x)) { inl = 0; break; }
                int overflow = 0;
                long long n = PyLong_AsLongLongAndOverflow(x, &overflow);
                if (n == -1 && PyErr_Occurred()) return -1;
                if (overflow) { inl = 0; break; }
                if (n != s->dims[d]) return 0;
            }
            if (inl) continue;
        }
        int eq = PyObject_RichCompareBool(s->key[i], v, Py_EQ);
        if (eq <= 0) return eq;
    }
    return 1;
}

int texts_find(TTable *t, PyObject *gen, PyObject *name, PyObject **vals, TText **hit) {
    *hit = NULL;
    follow_gen(t, gen);
    if (!t->used) return 0;
    Py_hash_t h = PyObject_Hash(name);
    if (h == -1) return -1;
    TText *s = probe(t, name, h);
    if (!s) return -1;
    if (!s->name) return 0;
    int m = key_matches(s, vals);
    if (m > 0) *hit = s;
    return m;
}

/* The C values of a key's nbytes and shape, when they are plain ints (else compared as objects). */
static void inline_key(TText *s) {
    int overflow = 0;
    PyObject *nb = s->key[1], *shape = s->key[3];
    s->nb_ok = 0;
    if (PyLong_CheckExact(nb)) {
        s->nbytes = PyLong_AsLongLongAndOverflow(nb, &overflow);
        s->nb_ok = !overflow && !(s->nbytes == -1 && PyErr_Occurred());
    }
    PyErr_Clear();
    s->ndim = -1;
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > T_DIMS) return;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++) {
        PyObject *x = PyTuple_GET_ITEM(shape, d);
        if (!PyLong_CheckExact(x)) return;
        s->dims[d] = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || (s->dims[d] == -1 && PyErr_Occurred())) { PyErr_Clear(); return; }
    }
    s->ndim = (int)PyTuple_GET_SIZE(shape);
}

/* The X head and the args copied inline when both are ASCII and fit (else hx_len -1: the tuple's
 * strings are read instead). */
static void inline_text(TText *s) {
    PyObject *hx = PyTuple_GET_ITEM(s->c, HX), *args = PyTuple_GET_ITEM(s->c, ARGS);
    s->hx_len = -1;
    if (!PyUnicode_CheckExact(hx) || !PyUnicode_IS_ASCII(hx) || !PyUnicode_CheckExact(args) ||
        !PyUnicode_IS_ASCII(args))
        return;
    Py_ssize_t nh = PyUnicode_GET_LENGTH(hx), na = PyUnicode_GET_LENGTH(args);
    if (nh + na > T_INLINE) return;
    memcpy(s->text, PyUnicode_1BYTE_DATA(hx), nh);
    memcpy(s->text + nh, PyUnicode_1BYTE_DATA(args), na);
    s->hx_len = nh;
    s->args_len = na;
}

static int grow(TTable *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 256;
    if (cap > T_MAX_SLOTS) {   /* names that count up (unnamed ops): start again, bounded */
        texts_clear(t);
        return 0;
    }
    TText *old = t->slots, *slots = PyMem_Calloc(cap, sizeof(TText));
    if (!slots) { PyErr_NoMemory(); return -1; }
    Py_ssize_t n = t->cap;
    t->slots = slots;
    t->cap = cap;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!old[i].name) continue;
        size_t mask = (size_t)cap - 1, j = (size_t)old[i].hash & mask;
        while (slots[j].name) j = (j + 1) & mask;   /* names are distinct: no comparing */
        slots[j] = old[i];
    }
    PyMem_Free(old);
    return 0;
}

int texts_put(TTable *t, PyObject *name, PyObject *c, TText **out) {
    *out = NULL;
    PyObject *key = PyTuple_GET_ITEM(c, KEY);
    if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != TKEY) return 0;   /* not kept */
    Py_hash_t h = PyObject_Hash(name);
    if (h == -1) return -1;
    if ((t->used + 1) * 2 > t->cap && grow(t) < 0) return -1;
    TText *s = probe(t, name, h);
    if (!s) return -1;
    if (!s->name) t->used++;
    Py_INCREF(name);
    Py_INCREF(c);
    slot_clear(s);
    s->name = name;
    s->c = c;
    s->hash = h;
    for (int i = 0; i < TKEY; i++) s->key[i] = PyTuple_GET_ITEM(key, i);   /* held by c */
    inline_key(s);
    inline_text(s);
    *out = s;
    return 0;
}
