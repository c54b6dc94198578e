/* tracer/_texts.c: the completions' flat table of tensors' constant text. */
#ifndef RINGSCOPE_TEXTS_H
#define RINGSCOPE_TEXTS_H
#include <Python.h>

#define TKEY 6            /* op_type, nbytes, dtype, shape, reduce_op, process_set */
#define T_DIMS 6          /* shapes up to this many dimensions are compared inline */
#define T_INLINE 256      /* bytes of an X head and args kept inline */
#define T_MAX_SLOTS 8192  /* past this the table starts again (names that count up) */

typedef struct {
    PyObject *name;           /* held; NULL: an empty slot */
    PyObject *c;              /* the text tuple (held; it holds the key's objects) */
    Py_hash_t hash;
    PyObject *key[TKEY];      /* the key's values (borrowed from c) */
    long long nbytes;         /* key[1] in C, when nb_ok */
    int nb_ok, ndim;          /* ndim -1: the shape is compared as an object */
    long long dims[T_DIMS];
    Py_ssize_t hx_len, args_len;   /* hx_len -1: not inline (read c's strings) */
    char text[T_INLINE];      /* the X line's head, then its args */
} TText;

typedef struct {
    TText *slots;
    Py_ssize_t cap, used;
    PyObject *gen_seen;       /* the line builder's generation it was filled under (held) */
} TTable;

/* The slot of ``name`` whose key is the op's ``vals`` (*hit; 1), or 0 when there is none, -1 on
 * error. ``gen`` is the line builder's one-item generation list: a new value empties the table. */
int texts_find(TTable *t, PyObject *gen, PyObject *name, PyObject **vals, TText **hit);
/* ``name``'s text tuple ``c`` (from the line builder) kept in the table (*out: its slot, or NULL
 * when ``c`` cannot be kept); -1 on error. */
int texts_put(TTable *t, PyObject *name, PyObject *c, TText **out);
void texts_clear(TTable *t);
void texts_free(TTable *t);
#endif
