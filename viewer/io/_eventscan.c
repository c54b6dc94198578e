/* viewer.io._eventscan: one pass over a JSON array of event objects into columns.
 *
 * scan(buffer, start, end, fields, lines) walks buffer[start:end] (the inside of a trace's event
 * array), validating every byte as JSON, and keeps only the requested fields of each object, as
 * columns: a status byte per row (0 absent, 1 read, 2 null, 3 another type) and a value (int32 code
 * into a list of the distinct strings for "s" fields; int64 for "i"; float64 for "f"; for "k" an
 * int32 code into distinct ints and strings; for "l" a list of strings as codes plus offsets).
 * Fields are top-level keys or "args.KEY"; "args" itself may be asked for with kind "o" (its
 * status only). Everything else is skipped without building objects.
 *
 * An element that is not valid JSON ends its event: the error is recorded (where the event began,
 * where the error is, why, and where reading goes on) and scanning resumes at the next event end
 * ('}' then ',' for Kineto's multi-line events, the next line when `lines` is true); the event's
 * partial values are dropped. Elements that are not objects are recorded and skipped; objects
 * written without a separator (a comma, or with `lines` a newline) are read and recorded. Public C API only (no numpy: the columns are
 * returned as bytes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 32
#define MAX_DEPTH 256

enum { ST_ABSENT = 0, ST_READ = 1, ST_NULL = 2, ST_TYPE = 3 };

typedef struct { char *p; Py_ssize_t len, cap; } Buf;

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *p = PyMem_Realloc(b->p, cap);
        if (!p) { PyErr_NoMemory(); return -1; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

/* distinct strings (or, for "k" fields, ints and strings) of one column, by their raw bytes */
typedef struct { uint64_t hash; const unsigned char *raw; Py_ssize_t len; int32_t code; } Slot;
typedef struct { Slot *slots; Py_ssize_t cap, used; PyObject *values; } Intern;

typedef struct {
    const char *key; Py_ssize_t klen;
    char kind;             /* s k i f l o */
    Buf status, vals;      /* per row */
    Buf items;             /* "l": int32 codes of every item; vals hold int64 end offsets */
    Intern in;
    int is_arg;
    PyObject *name;        /* as asked (borrowed from the spec) */
    /* the row being read ("l": its items are items[mark:]) */
    unsigned char st; int64_t iv; double fv; int32_t code; Py_ssize_t mark;
} Field;

typedef struct {
    const unsigned char *b;
    Py_ssize_t pos, end;
    const char *err; Py_ssize_t err_at;
    Field *top[MAX_FIELDS], *args[MAX_FIELDS];
    int n_top, n_args;
    Field *args_field;     /* kind "o" "args", or NULL */
    char num[128];
    locale_t c_locale;
} Scan;

static uint64_t hash_bytes(const unsigned char *p, Py_ssize_t n, uint64_t seed) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ seed ^ (uint64_t)n, w;   /* 8 bytes a step, then the rest */
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int intern_grow(Intern *in) {
    Py_ssize_t cap = in->cap ? in->cap * 2 : 64;
    Slot *s = PyMem_Calloc(cap, sizeof(Slot));
    if (!s) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < in->cap; i++) {
        if (!in->slots[i].raw) continue;
        Py_ssize_t j = in->slots[i].hash & (cap - 1);
        while (s[j].raw) j = (j + 1) & (cap - 1);
        s[j] = in->slots[i];
    }
    PyMem_Free(in->slots);
    in->slots = s;
    in->cap = cap;
    return 0;
}

static int fail(Scan *s, Py_ssize_t at, const char *why) {
    s->err = why;
    s->err_at = at;
    return -1;
}

static const unsigned char HEX[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9,
    ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16};

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        if (!HEX[p[i]]) return -1;
        v = v * 16 + HEX[p[i]] - 1;
    }
    *out = v;
    return 0;
}

/* A string's text (raw: between the quotes, escapes still in) as a Python str; NULL with s->err set
 * for bad escapes or UTF-8, NULL with a Python error for memory. */
static PyObject *decode_string(Scan *s, const unsigned char *raw, Py_ssize_t n, Py_ssize_t at) {
    if (!memchr(raw, '\\', n)) {
        PyObject *o = PyUnicode_DecodeUTF8((const char *)raw, n, "strict");
        if (!o && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            fail(s, at, "invalid UTF-8 in a string");
        }
        return o;
    }
    char *out = PyMem_Malloc(n + 1), *w = out;
    if (!out) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        if (raw[i] != '\\') { *w++ = raw[i]; continue; }
        unsigned char c = raw[++i];
        switch (c) {
        case '"': case '\\': case '/': *w++ = c; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        default: {   /* 'u', checked by the scanner */
            unsigned u = 0, lo;
            hex4(raw + i + 1, &u);
            i += 4;
            if (u >= 0xD800 && u < 0xDC00 && i + 6 < n && raw[i + 1] == '\\' && raw[i + 2] == 'u'
                    && hex4(raw + i + 3, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (u >= 0xD800 && u < 0xE000) {
                PyMem_Free(out);
                fail(s, at, "a lone surrogate escape in a string");
                return NULL;
            }
            if (u < 0x80) *w++ = (char)u;
            else if (u < 0x800) { *w++ = 0xC0 | (u >> 6); *w++ = 0x80 | (u & 0x3F); }
            else if (u < 0x10000) {
                *w++ = 0xE0 | (u >> 12); *w++ = 0x80 | ((u >> 6) & 0x3F); *w++ = 0x80 | (u & 0x3F);
            } else {
                *w++ = 0xF0 | (u >> 18); *w++ = 0x80 | ((u >> 12) & 0x3F);
                *w++ = 0x80 | ((u >> 6) & 0x3F); *w++ = 0x80 | (u & 0x3F);
            }
        }
        }
    }
    PyObject *o = PyUnicode_DecodeUTF8(out, w - out, "strict");
    PyMem_Free(out);
    if (!o && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        fail(s, at, "invalid UTF-8 in a string");
    }
    return o;
}

/* The code of a value (tag 's' string, 'i' integer token) in a column's distinct values; -1 with
 * s->err set (bad text), -2 on a Python error. */
static int32_t intern(Scan *s, Intern *in, char tag, const unsigned char *raw, Py_ssize_t n, Py_ssize_t at) {
    if ((in->used + 1) * 2 > in->cap && intern_grow(in) < 0) return -2;
    uint64_t h = hash_bytes(raw, n, (uint64_t)tag);
    Py_ssize_t j = h & (in->cap - 1);
    while (in->slots[j].raw) {
        Slot *sl = &in->slots[j];
        if (sl->hash == h && sl->len == n && memcmp(sl->raw, raw, n) == 0) return sl->code;
        j = (j + 1) & (in->cap - 1);
    }
    PyObject *o;
    if (tag == 's') {
        o = decode_string(s, raw, n, at);
    } else {
        char *tmp = PyMem_Malloc(n + 1);
        if (!tmp) { PyErr_NoMemory(); return -2; }
        memcpy(tmp, raw, n);
        tmp[n] = 0;
        o = PyLong_FromString(tmp, NULL, 10);
        PyMem_Free(tmp);
    }
    if (!o) return s->err ? -1 : -2;
    Py_ssize_t code = PyList_GET_SIZE(in->values);
    int rc = PyList_Append(in->values, o);
    Py_DECREF(o);
    if (rc < 0) return -2;
    in->slots[j] = (Slot){h, raw, n, (int32_t)code};
    in->used++;
    return (int32_t)code;
}

/* ---- the JSON grammar --------------------------------------------------------------------------- */
static const unsigned char STR_STOP[256] = {
    [0] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1};

static inline void ws(Scan *s) {
    const unsigned char *b = s->b;
    while (s->pos < s->end && (b[s->pos] == ' ' || b[s->pos] == '\n' || b[s->pos] == '\r' || b[s->pos] == '\t'))
        s->pos++;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points beyond U+10FFFF). */
static int utf8_ok(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (int k = 1; k < len; k++)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) || (c == 0xF0 && p[i + 1] < 0x90)
                || (c == 0xF4 && p[i + 1] > 0x8F))
            return 0;
        i += len;
    }
    return 1;
}

/* After the opening quote: leaves pos after the closing one; raw and n: the text between, which is
 * checked to be UTF-8 (as every JSON string must be). */
static int scan_string(Scan *s, const unsigned char **raw, Py_ssize_t *n) {
    const unsigned char *b = s->b;
    Py_ssize_t i = s->pos, end = s->end;
    unsigned char high = 0;
    *raw = b + i;
    for (;;) {
        while (i < end && !STR_STOP[b[i]]) high |= b[i++];
        if (i >= end) return fail(s, end, "unexpected end of data in a string");
        if (b[i] == '"') break;
        if (b[i] != '\\') return fail(s, i, "a control character in a string");
        if (i + 1 >= end) return fail(s, end, "unexpected end of data in a string");
        unsigned char c = b[i + 1];
        if (c == 'u') {
            unsigned u;
            if (i + 6 > end || hex4(b + i + 2, &u) < 0) return fail(s, i, "invalid \\u escape");
            if (u >= 0xDC00 && u < 0xE000) return fail(s, i, "a lone surrogate escape in a string");
            if (u >= 0xD800 && u < 0xDC00) {   /* a high surrogate: its low half must follow */
                unsigned lo;
                if (i + 12 > end || b[i + 6] != '\\' || b[i + 7] != 'u' || hex4(b + i + 8, &lo) < 0
                        || lo < 0xDC00 || lo >= 0xE000)
                    return fail(s, i, "a lone surrogate escape in a string");
                i += 6;
            }
            i += 6;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
            i += 2;
        } else {
            return fail(s, i, "invalid escape in a string");
        }
    }
    *n = b + i - *raw;
    if ((high & 0x80) && !utf8_ok(*raw, *n)) return fail(s, s->pos, "invalid UTF-8 in a string");
    s->pos = i + 1;
    return 0;
}

/* A number at pos: its extent; *is_int when it has no fraction or exponent. */
static int scan_number(Scan *s, Py_ssize_t *len, int *is_int) {
    const unsigned char *b = s->b;
    Py_ssize_t i = s->pos, end = s->end, at = s->pos;
    *is_int = 1;
    if (i < end && b[i] == '-') i++;
    if (i >= end || b[i] < '0' || b[i] > '9') return fail(s, at, "invalid number");
    if (b[i] == '0') i++;
    else while (i < end && b[i] >= '0' && b[i] <= '9') i++;
    if (i < end && b[i] == '.') {
        *is_int = 0;
        i++;
        if (i >= end || b[i] < '0' || b[i] > '9') return fail(s, at, "invalid number");
        while (i < end && b[i] >= '0' && b[i] <= '9') i++;
    }
    Py_ssize_t int_digits = i - at - (b[at] == '-'), exp = 0;
    if (*is_int == 0) {   /* the digits before the point */
        const unsigned char *dot = memchr(b + at, '.', i - at);
        if (dot) int_digits = dot - (b + at) - (b[at] == '-');
    }
    if (i < end && (b[i] == 'e' || b[i] == 'E')) {
        *is_int = 0;
        i++;
        int neg = i < end && b[i] == '-';
        if (i < end && (b[i] == '+' || b[i] == '-')) i++;
        if (i >= end || b[i] < '0' || b[i] > '9') return fail(s, at, "invalid number");
        for (; i < end && b[i] >= '0' && b[i] <= '9'; i++)
            if (exp < 100000) exp = exp * 10 + (b[i] - '0');
        if (neg) exp = -exp;
    }
    *len = i - at;
    s->pos = i;
    if (int_digits + exp > 308) {   /* perhaps beyond a double, which JSON readers refuse */
        char *tmp = PyMem_Malloc(*len + 1);
        if (!tmp) return fail(s, at, "out of memory");
        memcpy(tmp, b + at, *len);
        tmp[*len] = 0;
        double v = strtod_l(tmp, NULL, s->c_locale);
        PyMem_Free(tmp);
        if (isinf(v)) return fail(s, at, "a number beyond a double's range");
    }
    return 0;
}

static int literal(Scan *s, const char *word, Py_ssize_t n) {
    if (s->pos + n > s->end) return fail(s, s->end, "unexpected end of data");
    if (memcmp(s->b + s->pos, word, n) != 0) return fail(s, s->pos, "unexpected character");
    s->pos += n;
    return 0;
}

static int skip_value(Scan *s, int depth);

static int skip_container(Scan *s, int depth, unsigned char close) {
    if (depth > MAX_DEPTH) return fail(s, s->pos, "nested too deeply");
    s->pos++;
    ws(s);
    if (s->pos < s->end && s->b[s->pos] == close) { s->pos++; return 0; }
    for (;;) {
        if (close == '}') {
            const unsigned char *raw; Py_ssize_t n;
            if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
            if (s->b[s->pos] != '"') return fail(s, s->pos, "expected a key");
            s->pos++;
            if (scan_string(s, &raw, &n) < 0) return -1;
            ws(s);
            if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
            if (s->b[s->pos] != ':') return fail(s, s->pos, "expected ':'");
            s->pos++;
        }
        if (skip_value(s, depth + 1) < 0) return -1;
        ws(s);
        if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
        unsigned char c = s->b[s->pos++];
        if (c == close) return 0;
        if (c != ',') return fail(s, s->pos - 1, "expected ',' or a closing bracket");
        ws(s);
    }
}

static int skip_value(Scan *s, int depth) {
    ws(s);
    if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
    const unsigned char *raw; Py_ssize_t n; int is_int;
    switch (s->b[s->pos]) {
    case '"': s->pos++; return scan_string(s, &raw, &n);
    case '{': return skip_container(s, depth, '}');
    case '[': return skip_container(s, depth, ']');
    case 't': return literal(s, "true", 4);
    case 'f': return literal(s, "false", 5);
    case 'n': return literal(s, "null", 4);
    case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
    case '9': return scan_number(s, &n, &is_int);
    default: return fail(s, s->pos, "unexpected character");
    }
}

/* Up to 19 significant digits with at most 27 after the point (Kineto's epoch µs with ns decimals):
 * one division in 64-bit-mantissa long double, exact operands, then to double. That second rounding
 * can differ from a correct one only when the first lands exactly halfway between two doubles: then
 * (and without such a long double) the caller falls back to strtod. */
static int decimal_to_double(const unsigned char *p, Py_ssize_t n, double *out) {
#if LDBL_MANT_DIG >= 64
    static const long double P10[28] = {1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L,
        1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L,
        1e25L, 1e26L, 1e27L};
    Py_ssize_t i = p[0] == '-', digits = 0, frac = -1;
    uint64_t m = 0;
    for (; i < n; i++) {
        if (p[i] == '.') { frac = 0; continue; }
        if (p[i] < '0' || p[i] > '9') return -1;   /* an exponent */
        if (++digits > 19) return -1;
        m = m * 10 + (p[i] - '0');
        if (frac >= 0) frac++;
    }
    if (frac > 27) return -1;
    long double x = (long double)m / P10[frac < 0 ? 0 : frac];
    double d = (double)x;
    if ((long double)d != x) {
        double other = nextafter(d, (double)(x > (long double)d ? INFINITY : -INFINITY));
        if (((long double)d + (long double)other) / 2 == x) return -1;
    }
    *out = p[0] == '-' ? -d : d;
    return 0;
#else
    (void)p; (void)n; (void)out;
    return -1;
#endif
}

static int to_double(Scan *s, const unsigned char *p, Py_ssize_t n, double *out) {
    if (decimal_to_double(p, n, out) == 0) return 0;
    char *tmp = n < (Py_ssize_t)sizeof(s->num) ? s->num : PyMem_Malloc(n + 1);
    if (!tmp) { PyErr_NoMemory(); return -2; }
    memcpy(tmp, p, n);
    tmp[n] = 0;
    *out = strtod_l(tmp, NULL, s->c_locale);
    if (tmp != s->num) PyMem_Free(tmp);
    return 0;
}

/* A requested field's value at pos, into the field's row slot. -1: bad JSON, -2: Python error. */
static int read_field(Scan *s, Field *f, int depth) {
    ws(s);
    if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
    unsigned char c = s->b[s->pos];
    Py_ssize_t at = s->pos;
    if (c == 'n') {
        if (literal(s, "null", 4) < 0) return -1;
        f->st = ST_NULL;
        return 0;
    }
    const unsigned char *raw; Py_ssize_t n; int is_int;
    switch (f->kind) {
    case 's':
    case 'k':
        if (c == '"') {
            s->pos++;
            if (scan_string(s, &raw, &n) < 0) return -1;
            int32_t code = intern(s, &f->in, 's', raw, n, at);
            if (code < 0) return code;
            f->code = code;
            f->st = ST_READ;
            return 0;
        }
        if (f->kind == 'k' && (c == '-' || (c >= '0' && c <= '9'))) {
            if (scan_number(s, &n, &is_int) < 0) return -1;
            if (!is_int) { f->st = ST_TYPE; return 0; }
            int32_t code = intern(s, &f->in, 'i', s->b + at, n, at);
            if (code < 0) return code;
            f->code = code;
            f->st = ST_READ;
            return 0;
        }
        break;
    case 'i':
    case 'f':
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (scan_number(s, &n, &is_int) < 0) return -1;
            const unsigned char *p = s->b + at;
            if (f->kind == 'i') {
                if (!is_int) { f->st = ST_TYPE; return 0; }
                int neg = p[0] == '-';
                uint64_t v = 0;
                for (Py_ssize_t i = neg; i < n; i++) {
                    unsigned d = p[i] - '0';
                    if (v > (UINT64_MAX - d) / 10) { f->st = ST_TYPE; return 0; }
                    v = v * 10 + d;
                }
                if (v > (uint64_t)INT64_MAX + (uint64_t)neg) { f->st = ST_TYPE; return 0; }
                f->iv = neg ? (int64_t)(0 - v) : (int64_t)v;
            } else if (is_int && n <= 15) {
                int neg = p[0] == '-';
                int64_t v = 0;
                for (Py_ssize_t i = neg; i < n; i++) v = v * 10 + (p[i] - '0');
                f->fv = neg ? -(double)v : (double)v;
            } else if (to_double(s, p, n, &f->fv) < 0) {
                return -2;
            }
            f->st = ST_READ;
            return 0;
        }
        break;
    case 'l':
        if (c == '[') {
            s->pos++;
            int ok = 1;
            f->items.len = f->mark;
            ws(s);
            if (s->pos < s->end && s->b[s->pos] == ']') { s->pos++; }
            else for (;;) {
                ws(s);
                if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
                if (s->b[s->pos] == '"') {
                    Py_ssize_t sat = s->pos++;
                    if (scan_string(s, &raw, &n) < 0) return -1;
                    int32_t code = intern(s, &f->in, 's', raw, n, sat);
                    if (code < 0) return code;
                    if (buf_put(&f->items, &code, sizeof code) < 0) return -2;
                } else {
                    ok = 0;
                    if (skip_value(s, depth + 1) < 0) return -1;
                }
                ws(s);
                if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
                unsigned char d = s->b[s->pos++];
                if (d == ']') break;
                if (d != ',') return fail(s, s->pos - 1, "expected ',' or ']'");
            }
            if (!ok) { f->items.len = f->mark; f->st = ST_TYPE; return 0; }
            f->st = ST_READ;
            return 0;
        }
        break;
    case 'o':
        if (c == '{') { f->st = ST_READ; return skip_value(s, depth); }
        break;
    }
    if (f->kind == 'l') f->items.len = f->mark;
    f->st = ST_TYPE;
    return skip_value(s, depth);
}

static Field *find(Field **fs, int n, const unsigned char *key, Py_ssize_t klen) {
    for (int i = 0; i < n; i++)
        if (fs[i]->klen == klen && memcmp(fs[i]->key, key, klen) == 0) return fs[i];
    return NULL;
}

/* One object at pos ('{'), keys matched against `fs`; "args" descends into the args fields. */
static int read_object(Scan *s, Field **fs, int nf, int depth) {
    s->pos++;
    ws(s);
    if (s->pos < s->end && s->b[s->pos] == '}') { s->pos++; return 0; }
    for (;;) {
        const unsigned char *key; Py_ssize_t klen;
        if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
        if (s->b[s->pos] != '"') return fail(s, s->pos, "expected a key");
        s->pos++;
        if (scan_string(s, &key, &klen) < 0) return -1;
        ws(s);
        if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
        if (s->b[s->pos] != ':') return fail(s, s->pos, "expected ':'");
        s->pos++;
        Field *f = find(fs, nf, key, klen);
        int rc;
        if (depth == 0 && s->n_args && klen == 4 && memcmp(key, "args", 4) == 0) {
            ws(s);
            for (int i = 0; i < s->n_args; i++) {   /* the last "args" wins */
                s->args[i]->st = ST_ABSENT;
                s->args[i]->items.len = s->args[i]->mark;
            }
            if (s->pos < s->end && s->b[s->pos] == '{') {
                if (s->args_field) s->args_field->st = ST_READ;
                rc = read_object(s, s->args, s->n_args, 1);
            } else {
                rc = s->args_field ? read_field(s, s->args_field, depth + 1) : skip_value(s, depth + 1);
            }
        } else if (f) {
            rc = read_field(s, f, depth + 1);
        } else {
            rc = skip_value(s, depth + 1);
        }
        if (rc < 0) return rc;
        ws(s);
        if (s->pos >= s->end) return fail(s, s->end, "unexpected end of data");
        unsigned char c = s->b[s->pos++];
        if (c == '}') return 0;
        if (c != ',') return fail(s, s->pos - 1, "expected ',' or '}'");
        ws(s);
    }
}

static int commit_row(Scan *s, Field **all, int n) {
    for (int i = 0; i < n; i++) {
        Field *f = all[i];
        if (buf_put(&f->status, &f->st, 1) < 0) return -1;
        int rc = 0;
        switch (f->kind) {
        case 's': case 'k': {
            int32_t c = f->st == ST_READ ? f->code : -1;
            rc = buf_put(&f->vals, &c, sizeof c);
            break;
        }
        case 'i': { int64_t v = f->st == ST_READ ? f->iv : 0; rc = buf_put(&f->vals, &v, sizeof v); break; }
        case 'f': { double v = f->st == ST_READ ? f->fv : 0.0; rc = buf_put(&f->vals, &v, sizeof v); break; }
        case 'l': {
            if (f->st != ST_READ) f->items.len = f->mark;
            int64_t e = f->items.len / (Py_ssize_t)sizeof(int32_t);
            rc = buf_put(&f->vals, &e, sizeof e);
            f->mark = f->items.len;
            break;
        }
        }
        if (rc < 0) return -1;
        f->st = ST_ABSENT;
    }
    return 0;
}

/* Where reading goes on after an error at `at`: after the next '}' that ',' follows (Kineto), or
 * after the next newline (one event per line); -1 when there is none before the end. */
static Py_ssize_t resync(Scan *s, Py_ssize_t at, int lines) {
    const unsigned char *b = s->b;
    if (lines) {
        const unsigned char *nl = memchr(b + at, '\n', s->end - at);
        return nl ? nl - b + 1 : -1;
    }
    for (Py_ssize_t i = at; i < s->end; i++) {
        if (b[i] != '}') continue;
        Py_ssize_t j = i + 1;
        while (j < s->end && (b[j] == ' ' || b[j] == '\n' || b[j] == '\r' || b[j] == '\t')) j++;
        if (j < s->end && b[j] == ',') return i + 1;
    }
    return -1;
}

static PyObject *bytes_of(Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *spec;
    int lines;
    if (!PyArg_ParseTuple(args, "y*nnOp", &view, &start, &end, &spec, &lines)) return NULL;
    PyObject *result = NULL, *errors = NULL, *glued = NULL, *other = NULL, *cols = NULL;
    Field fields[MAX_FIELDS];
    Field *all[MAX_FIELDS];
    int nf = 0;
    Scan s = {0};
    Buf starts = {0}, ends = {0};
    memset(fields, 0, sizeof fields);
    s.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!s.c_locale) { PyErr_SetString(PyExc_OSError, "no C locale"); goto done; }
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "start/end outside the buffer");
        goto done;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) > MAX_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "fields: a tuple of (name, kind) pairs, at most 32");
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spec); i++) {
        const char *name, *kind;
        Py_ssize_t nlen;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(spec, i), "s#s", &name, &nlen, &kind)) goto done;
        Field *f = &fields[nf];
        f->kind = kind[0];
        f->name = PyTuple_GET_ITEM(PyTuple_GET_ITEM(spec, i), 0);
        if (!strchr("skiflo", f->kind) || !f->kind) {
            PyErr_Format(PyExc_ValueError, "field %s: unknown kind %s", name, kind);
            goto done;
        }
        if ((f->kind == 's' || f->kind == 'k' || f->kind == 'l') && !(f->in.values = PyList_New(0))) goto done;
        all[nf++] = f;
        if (nlen > 5 && memcmp(name, "args.", 5) == 0) {
            f->key = name + 5; f->klen = nlen - 5; f->is_arg = 1;
            s.args[s.n_args++] = f;
        } else {
            f->key = name; f->klen = nlen;
            if (f->kind == 'o' && nlen == 4 && memcmp(name, "args", 4) == 0) s.args_field = f;
            else s.top[s.n_top++] = f;
        }
    }
    if (s.args_field && !s.n_args) s.top[s.n_top++] = s.args_field;
    if (!(errors = PyList_New(0)) || !(glued = PyList_New(0)) || !(other = PyList_New(0))) goto done;
    s.b = view.buf;
    s.pos = start;
    s.end = end;
    Py_ssize_t stop = end, n_rows = 0;
    int after_object = 0;
    for (;;) {
        const unsigned char *b = s.b;
        int sep = 0;
        while (s.pos < end && (b[s.pos] == ' ' || b[s.pos] == '\n' || b[s.pos] == '\r' || b[s.pos] == '\t'
                               || b[s.pos] == ',')) {
            sep |= b[s.pos] == ',' || (lines && b[s.pos] == '\n');   /* one event per line: a newline separates */
            s.pos++;
        }
        if (s.pos >= end) break;
        Py_ssize_t at = s.pos;
        s.err = NULL;
        int rc;
        if (b[at] == '{') {
            if (after_object && !sep) {
                PyObject *o = PyLong_FromSsize_t(at);
                if (!o || PyList_Append(glued, o) < 0) { Py_XDECREF(o); goto done; }
                Py_DECREF(o);
            }
            rc = read_object(&s, s.top, s.n_top, 0);
            if (rc == 0) {
                int64_t a = at, e = s.pos;
                if (commit_row(&s, all, nf) < 0 || buf_put(&starts, &a, 8) < 0 || buf_put(&ends, &e, 8) < 0)
                    goto done;
                n_rows++;
                after_object = 1;
                continue;
            }
        } else {
            rc = skip_value(&s, 0);
            if (rc == 0) {
                PyObject *o = Py_BuildValue("(nn)", at, s.pos);
                if (!o || PyList_Append(other, o) < 0) { Py_XDECREF(o); goto done; }
                Py_DECREF(o);
                after_object = 0;
                continue;
            }
        }
        if (rc == -2 || !s.err) goto done;
        for (int i = 0; i < nf; i++) {
            all[i]->st = ST_ABSENT;
            all[i]->items.len = all[i]->mark;
        }
        Py_ssize_t next = resync(&s, lines || s.err_at < at ? at : s.err_at, lines);   /* lines: the event's own */
        PyObject *o = Py_BuildValue("(nnsn)", at, s.err_at, s.err, next);
        if (!o || PyList_Append(errors, o) < 0) { Py_XDECREF(o); goto done; }
        Py_DECREF(o);
        if (next < 0) { stop = at; break; }
        s.pos = next;
        after_object = 0;
    }
    if (!(cols = PyDict_New())) goto done;
    for (int i = 0; i < nf; i++) {
        Field *f = all[i];
        PyObject *st = bytes_of(&f->status), *v = bytes_of(&f->vals), *items = NULL, *t;
        if (f->kind == 'l') items = bytes_of(&f->items);
        if (f->in.values)
            t = f->kind == 'l' ? Py_BuildValue("(NNNO)", st, v, items, f->in.values)
                               : Py_BuildValue("(NNO)", st, v, f->in.values);
        else
            t = Py_BuildValue("(NN)", st, v);
        if (!t || PyDict_SetItem(cols, f->name, t) < 0) { Py_XDECREF(t); goto done; }
        Py_DECREF(t);
    }
    result = Py_BuildValue("{s:n,s:N,s:N,s:O,s:O,s:O,s:O,s:n}", "rows", n_rows, "start", bytes_of(&starts),
                           "end", bytes_of(&ends), "columns", cols, "errors", errors, "glued", glued,
                           "other", other, "stop", stop);
done:
    Py_XDECREF(cols);
    Py_XDECREF(errors);
    Py_XDECREF(glued);
    Py_XDECREF(other);
    for (int i = 0; i < nf; i++) {
        PyMem_Free(fields[i].status.p);
        PyMem_Free(fields[i].vals.p);
        PyMem_Free(fields[i].items.p);
        PyMem_Free(fields[i].in.slots);
        Py_XDECREF(fields[i].in.values);
    }
    PyMem_Free(starts.p);
    PyMem_Free(ends.p);
    if (s.c_locale) freelocale(s.c_locale);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, start, end, fields, lines) -> dict: the event objects of buffer[start:end] as columns "
     "(see the module's source for the layout)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_eventscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__eventscan(void) { return PyModule_Create(&module); }
