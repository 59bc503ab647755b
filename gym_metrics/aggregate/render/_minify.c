/* minify(buf, starts, ends, drop) -> (text, bounds, floats, values): rows of JSON text in the
   form orjson writes them, without parsing them into Python objects.

   Each row buf[starts[i]:ends[i]] must be one JSON object. Its minified text (whitespace
   outside strings removed, top-level members whose key is in `drop` left out) is appended to
   `text`; bounds holds (start, end) in `text` per row, or (-1, -1) for a row this module
   cannot vouch for. A row is refused (left to the Python path: parse, then orjson.dumps) when
   its minified text might differ from what orjson writes after parsing it: a string escape
   orjson would not write (\u...., \/), a repeated key in any object, an integer orjson would
   write differently (-0) or that may not fit 64 bits (19+ digits), NaN / Infinity, nesting
   deeper than 64, more than 64 keys in one object, bytes that are not UTF-8 or not JSON.

   Floats cannot be judged here (orjson writes the shortest text that reads back as the same
   double): every float token written is listed in `floats` as (row, start, end) in `text`,
   with its value (strtod) in `values`; the caller renders the values with orjson and refuses
   the rows whose token differs. Everything runs without the GIL. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_KEYS 64
#define MAX_DROP 8

typedef struct {
    const unsigned char *s;
    size_t n;
} Slice;

typedef struct {
    const unsigned char *p, *end;
    unsigned char *o, *out_base;
    int write;
    Slice keys[MAX_DEPTH * MAX_KEYS];
    size_t nkeys;
    const Slice *drop;
    int ndrop;
    Py_ssize_t row;
    int64_t *floats; /* (row, start, end) triples */
    double *values;
    size_t nfloats, cap;
    int nomem;
} Parser;

static void skip_ws(Parser *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static void emit(Parser *r, const void *s, size_t n) {
    if (r->write) {
        memcpy(r->o, s, n);
        r->o += n;
    }
}

/* Length of the UTF-8 sequence at p (a byte >= 0x80), or -1 when it is not valid UTF-8. */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return -1;
    if (end - p < n) return -1;
    if (p[1] < lo || p[1] > hi) return -1;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return -1;
    return n;
}

/* A string at p (on its opening quote), checked; p ends past its closing quote. */
static int scan_string(Parser *r) {
    r->p++;
    while (r->p < r->end) {
        unsigned char c = *r->p;
        if (c == '"') {
            r->p++;
            return 0;
        }
        if (c == '\\') {
            if (r->end - r->p < 2) return -1;
            c = r->p[1];
            if (c != '"' && c != '\\' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') return -1;
            r->p += 2;
        } else if (c < 0x20) {
            return -1;
        } else if (c < 0x80) {
            r->p++;
        } else {
            int n = utf8_len(r->p, r->end);
            if (n < 0) return -1;
            r->p += n;
        }
    }
    return -1;
}

static int is_digit(const Parser *r) { return r->p < r->end && *r->p >= '0' && *r->p <= '9'; }

static int add_float(Parser *r, size_t start, size_t n, double v) {
    if (r->nfloats == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        int64_t *f = realloc(r->floats, cap * 3 * sizeof(int64_t));
        if (!f) return r->nomem = 1, -1;
        r->floats = f;
        double *vals = realloc(r->values, cap * sizeof(double));
        if (!vals) return r->nomem = 1, -1;
        r->values = vals;
        r->cap = cap;
    }
    r->floats[3 * r->nfloats] = r->row;
    r->floats[3 * r->nfloats + 1] = (int64_t)start;
    r->floats[3 * r->nfloats + 2] = (int64_t)(start + n);
    r->values[r->nfloats++] = v;
    return 0;
}

static int number(Parser *r) {
    const unsigned char *s = r->p;
    int is_float = 0;
    if (*r->p == '-') r->p++;
    if (r->p < r->end && *r->p == '0') r->p++;
    else if (is_digit(r)) while (is_digit(r)) r->p++;
    else return -1;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (!is_digit(r)) return -1;
        while (is_digit(r)) r->p++;
        is_float = 1;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (!is_digit(r)) return -1;
        while (is_digit(r)) r->p++;
        is_float = 1;
    }
    size_t n = (size_t)(r->p - s);
    if (!is_float) {
        if (n == 2 && s[0] == '-' && s[1] == '0') return -1; /* orjson writes 0 */
        if (n - (s[0] == '-') > 18) return -1;
        emit(r, s, n);
        return 0;
    }
    if (n > 63) return -1;
    char tmp[64];
    memcpy(tmp, s, n);
    tmp[n] = 0;
    double v = strtod(tmp, NULL);
    if (!isfinite(v)) return -1;
    if (r->write && add_float(r, (size_t)(r->o - r->out_base), n, v) < 0) return -1;
    emit(r, s, n);
    return 0;
}

static int literal(Parser *r, const char *word, size_t n) {
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return -1;
    emit(r, word, n);
    r->p += n;
    return 0;
}

static int value(Parser *r, int depth);

static int dropped(const Parser *r, const Slice *key) {
    for (int k = 0; k < r->ndrop; k++)
        if (r->drop[k].n == key->n && memcmp(r->drop[k].s, key->s, key->n) == 0) return 1;
    return 0;
}

static int object(Parser *r, int depth, int top) {
    size_t base = r->nkeys;
    int first = 1;
    emit(r, "{", 1);
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        emit(r, "}", 1);
        return 0;
    }
    for (;;) {
        skip_ws(r);
        if (r->p >= r->end || *r->p != '"') return -1;
        const unsigned char *k = r->p;
        if (scan_string(r) < 0) return -1;
        Slice key = {k + 1, (size_t)(r->p - k - 2)};
        if (r->nkeys - base >= MAX_KEYS) return -1;
        for (size_t j = base; j < r->nkeys; j++)
            if (r->keys[j].n == key.n && memcmp(r->keys[j].s, key.s, key.n) == 0) return -1;
        r->keys[r->nkeys++] = key;
        int writing = r->write;
        if (top && dropped(r, &key)) {
            r->write = 0;
        } else {
            if (!first) emit(r, ",", 1);
            emit(r, k, (size_t)(r->p - k));
            emit(r, ":", 1);
            first = 0;
        }
        skip_ws(r);
        if (r->p >= r->end || *r->p != ':') return -1;
        r->p++;
        if (value(r, depth + 1) < 0) return -1;
        r->write = writing;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            emit(r, "}", 1);
            r->nkeys = base;
            return 0;
        }
        return -1;
    }
}

static int array(Parser *r, int depth) {
    emit(r, "[", 1);
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        emit(r, "]", 1);
        return 0;
    }
    for (;;) {
        if (value(r, depth + 1) < 0) return -1;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            emit(r, ",", 1);
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            emit(r, "]", 1);
            return 0;
        }
        return -1;
    }
}

static int value(Parser *r, int depth) {
    if (depth > MAX_DEPTH) return -1;
    skip_ws(r);
    if (r->p >= r->end) return -1;
    switch (*r->p) {
    case '{': return object(r, depth, 0);
    case '[': return array(r, depth);
    case '"': {
        const unsigned char *s = r->p;
        if (scan_string(r) < 0) return -1;
        emit(r, s, (size_t)(r->p - s));
        return 0;
    }
    case 't': return literal(r, "true", 4);
    case 'f': return literal(r, "false", 5);
    case 'n': return literal(r, "null", 4);
    default: return number(r);
    }
}

/* One row; 0 when its text was written whole, -1 when refused (nothing of it kept). */
static int row(Parser *r, const unsigned char *s, const unsigned char *e) {
    unsigned char *o = r->o;
    size_t nfloats = r->nfloats;
    r->p = s;
    r->end = e;
    r->write = 1;
    r->nkeys = 0;
    skip_ws(r);
    int ok = r->p < r->end && *r->p == '{' && object(r, 1, 1) == 0;
    if (ok) {
        skip_ws(r);
        ok = r->p == r->end;
    }
    if (!ok) {
        r->o = o;
        r->nfloats = nfloats;
        return -1;
    }
    return 0;
}

static int int64_view(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int64 array", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *minify(PyObject *self, PyObject *args) {
    PyObject *buf_arg, *starts_arg, *ends_arg, *drop_arg;
    if (!PyArg_ParseTuple(args, "OOOO:minify", &buf_arg, &starts_arg, &ends_arg, &drop_arg)) return NULL;
    Py_buffer buf, starts, ends;
    if (PyObject_GetBuffer(buf_arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    if (int64_view(starts_arg, &starts, "starts") < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (int64_view(ends_arg, &ends, "ends") < 0) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *result = NULL, *text = NULL, *bounds = NULL, *floats = NULL, *values = NULL;
    Parser *r = PyMem_Calloc(1, sizeof(Parser));
    Slice drop[MAX_DROP];
    Py_ssize_t rows = starts.len / 8;
    if (!r) {
        PyErr_NoMemory();
        goto done;
    }
    if (ends.len / 8 != rows) {
        PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
        goto done;
    }
    if (!PyTuple_Check(drop_arg) || PyTuple_GET_SIZE(drop_arg) > MAX_DROP) {
        PyErr_Format(PyExc_TypeError, "drop must be a tuple of at most %d bytes", MAX_DROP);
        goto done;
    }
    r->ndrop = (int)PyTuple_GET_SIZE(drop_arg);
    for (int k = 0; k < r->ndrop; k++) {
        PyObject *item = PyTuple_GET_ITEM(drop_arg, k);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "drop must hold bytes");
            goto done;
        }
        drop[k].s = (const unsigned char *)PyBytes_AS_STRING(item);
        drop[k].n = (size_t)PyBytes_GET_SIZE(item);
    }
    r->drop = drop;
    const int64_t *s = starts.buf, *e = ends.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (s[i] < 0 || s[i] > e[i] || e[i] > buf.len) {
            PyErr_Format(PyExc_ValueError, "row %zd lies outside the buffer", i);
            goto done;
        }
        total += (Py_ssize_t)(e[i] - s[i]);
    }
    text = PyBytes_FromStringAndSize(NULL, total); /* minified text is never longer */
    bounds = PyBytes_FromStringAndSize(NULL, 2 * rows * (Py_ssize_t)sizeof(int64_t));
    if (!text || !bounds) goto done;
    int64_t *b = (int64_t *)PyBytes_AS_STRING(bounds);
    r->out_base = r->o = (unsigned char *)PyBytes_AS_STRING(text);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows && !r->nomem; i++) {
        r->row = i;
        unsigned char *o = r->o;
        const unsigned char *base = (const unsigned char *)buf.buf;
        if (row(r, base + s[i], base + e[i]) == 0) {
            b[2 * i] = (int64_t)(o - r->out_base);
            b[2 * i + 1] = (int64_t)(r->o - r->out_base);
        } else {
            b[2 * i] = b[2 * i + 1] = -1;
        }
    }
    Py_END_ALLOW_THREADS
    if (r->nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (_PyBytes_Resize(&text, (Py_ssize_t)(r->o - r->out_base)) < 0) goto done;
    floats = PyBytes_FromStringAndSize((const char *)r->floats, (Py_ssize_t)(r->nfloats * 3 * sizeof(int64_t)));
    values = PyBytes_FromStringAndSize((const char *)r->values, (Py_ssize_t)(r->nfloats * sizeof(double)));
    if (floats && values) result = PyTuple_Pack(4, text, bounds, floats, values);
done:
    Py_XDECREF(text);
    Py_XDECREF(bounds);
    Py_XDECREF(floats);
    Py_XDECREF(values);
    if (r) {
        free(r->floats);
        free(r->values);
        PyMem_Free(r);
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

static PyMethodDef methods[] = {
    {"minify", minify, METH_VARARGS,
     "minify(buf, starts, ends, drop) -> (text, bounds, floats, values): JSON object rows as orjson writes them "
     "(top-level keys in `drop` left out); see the module's source for what is refused."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_minify", "JSON rows minified as orjson writes them.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__minify(void) { return PyModule_Create(&module); }
