/* A growing byte buffer for event lines, shared by the C files of tracer._oplines. */
#ifndef RINGSCOPE_BUF_H
#define RINGSCOPE_BUF_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <time.h>

/* time.perf_counter_ns() of CPython on Linux: CLOCK_MONOTONIC (a test checks the two agree). */
static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static inline int buf_grow(Buf *b, Py_ssize_t need) {
    if (b->len + need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need) cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, s) put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static inline int put_ll(Buf *b, long long v) {
    char tmp[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--i] = '-';
    return put(b, tmp + i, 24 - i);
}

/* Any object as an f-string would show it: ints fast, the rest through format(obj, ""). */
static inline int put_obj(Buf *b, PyObject *o) {
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) return put_ll(b, v);
        PyErr_Clear();
    }
    PyObject *s = PyUnicode_CheckExact(o) ? (Py_INCREF(o), o) : PyObject_Format(o, NULL);
    if (!s) return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    int r = u ? put(b, u, n) : -1;
    Py_DECREF(s);
    return r;
}

int buffer_record(PyObject *q, Py_ssize_t cap, PyObject *drops, PyObject *rec, long long events);

/* tracer/_lines.c: a recorder's lines, formatted where they are recorded */
int lines_check(PyObject *o);
int lines_text(PyObject *lines, const char *p, Py_ssize_t n, long long count);
int lines_record(PyObject *lines, PyObject *rec);

/* tracer/_oplines.c: one deferred record (a tuple) as a line; 1 written, 0 not (unusual values:
 * the Python formatter's job), -1 error */
int put_record(Buf *b, PyObject *r, PyObject *heads, PyObject *make, PyObject *names,
               PyObject *make_name, PyObject *dumps, PyObject *counter_cat, PyObject *zero);
/* ... the head of a (ph, tid, name, cat) line from the line builder's cache (a new reference), and
 * a span's args with its step: 1 written, 0 not plain (the Python formatter's job), -1 error */
PyObject *head_of(PyObject *heads, PyObject *make, PyObject *ph, PyObject *tid, PyObject *name,
                  PyObject *cat);
int put_span_args(Buf *b, PyObject *dumps, PyObject *args, PyObject *step);
/* ... the rest of an X line after its head (ts, dur, args; NULL ``dumps``: plain args only) and
 * of a counter line (ts, value): 1 written, 0 not plain, -1 error */
int put_x_rest(Buf *b, long long t0, long long t1, PyObject *dumps, PyObject *args,
               PyObject *step);
int put_c_rest(Buf *b, long long t, PyObject *value);
/* tracer/_lines.c: a span's or a counter's line written at once (1), or 0 when a value is not
 * plain (then the caller buffers its record tuple), -1 on error; dropped lines count as written */
int lines_span(PyObject *lines, PyObject *tid, PyObject *name, PyObject *cat, long long t0,
               long long t1, PyObject *args, PyObject *step);
int lines_counter(PyObject *lines, PyObject *name, long long t, PyObject *value);
/* ... the same, and a line with values the C formatter leaves to the writer goes as its record
 * tuple ("X", name, cat, tid, t0, t1, step, args, None) / ("C", name, t, value): 0 or -1 */
int lines_x(PyObject *lines, PyObject *tid, PyObject *name, PyObject *cat, long long t0,
            long long t1, PyObject *args, PyObject *step);
int lines_c(PyObject *lines, PyObject *name, long long t, PyObject *value);
/* tracer/_note.c: the lines of the response ``note`` has open, its span ending at ``t_end``
 * (absolute): 1 written (or none open), 0 ``note`` is not a Note, -1 error */
int note_complete(PyObject *note, long long t_end);
#endif
