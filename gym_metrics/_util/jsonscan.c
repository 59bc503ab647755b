/* Scans of JSON text that need no parse, both outside strings (a backslash escapes the next
   byte; JSON strings hold no raw newline). Run without the GIL.

   too_deep(buf, start, stop, limit) -> bool: whether a line of buf[start:stop] nests arrays and
   objects deeper than `limit`. pyarrow's JSON reader recurses once per level on its thread's
   stack: a valid line nested some 10,000 deep ends the process with a segmentation fault, which
   no Python code can catch. The rollout readers ask this first and read such a chunk line by
   line instead (orjson refuses more than 1,024 levels, naming the line).

   count_items(buf, start, stop) -> (containers, commas): the objects and lists, and the commas,
   of one document, for the bounds a request's JSON is held to (gym_metrics/_util/jsonbounds.py):
   counted with bytes.count first, an upper bound, these only when that is past a bound (code in
   a string is full of braces and commas). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    long depth, limit;
    int in_string;
    const unsigned char *escaped; /* the byte after a backslash in a string: not read */
} State;

/* One byte that matters (a quote, a backslash, a newline, a bracket): 1 when too deep. */
static inline int step(State *st, const unsigned char *q) {
    if (q == st->escaped) return 0;
    unsigned char c = *q;
    if (c == '\n') { /* JSON strings hold no raw newline: a line ends here whatever came before */
        st->depth = 0;
        st->in_string = 0;
    } else if (st->in_string) {
        if (c == '"') st->in_string = 0;
        else if (c == '\\') st->escaped = q + 1;
    } else if (c == '"') {
        st->in_string = 1;
    } else if (c == '[' || c == '{') {
        if (++st->depth > st->limit) return 1;
    } else if (c == ']' || c == '}') {
        st->depth--;
    }
    return 0;
}

static int matters(unsigned char c) {
    return c == '"' || c == '\\' || c == '\n' || c == '[' || c == ']' || c == '{' || c == '}';
}

/* The exact depth check of one line: brackets outside strings. */
static int deep_line(const unsigned char *p, const unsigned char *end, long limit) {
    State st = {0, limit, 0, NULL};
    for (; p < end; p++) {
        if (matters(*p) && step(&st, p)) return 1;
    }
    return 0;
}

/* A line with no more than `limit` opening brackets cannot nest deeper: count them first, 16
   bytes at a time (about 10 GB/s), and read exactly only the lines with more. */
static int scan(const unsigned char *p, const unsigned char *end, long limit) {
    const unsigned char *line = p;
    long opens = 0;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n'), open1 = _mm_set1_epi8('['), open2 = _mm_set1_epi8('{');
    for (; p + 16 <= end; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned lines = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        unsigned opened = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, open1), _mm_cmpeq_epi8(v, open2)));
        while (lines) {
            int i = __builtin_ctz(lines);
            unsigned before = opened & ((1u << i) - 1);
            opens += __builtin_popcount(before);
            if (opens > limit && deep_line(line, p + i, limit)) return 1;
            line = p + i + 1;
            opens = 0;
            opened &= ~((2u << i) - 1);
            lines &= lines - 1;
        }
        opens += __builtin_popcount(opened);
    }
#endif
    for (; p < end; p++) {
        if (*p == '\n') {
            if (opens > limit && deep_line(line, p, limit)) return 1;
            line = p + 1;
            opens = 0;
        } else if (*p == '[' || *p == '{') {
            opens++;
        }
    }
    return opens > limit && deep_line(line, end, limit);
}

static PyObject *too_deep(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, stop;
    long limit;
    if (!PyArg_ParseTuple(args, "y*nnl", &buf, &start, &stop, &limit)) return NULL;
    if (start < 0 || stop < start || stop > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "the span lies outside the buffer");
        return NULL;
    }
    int deep;
    const unsigned char *base = (const unsigned char *)buf.buf;
    Py_BEGIN_ALLOW_THREADS
    deep = scan(base + start, base + stop, limit);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyBool_FromLong(deep);
}

static PyObject *count_items(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &start, &stop)) return NULL;
    if (start < 0 || stop < start || stop > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "the span lies outside the buffer");
        return NULL;
    }
    long long containers = 0, commas = 0;
    const unsigned char *p = (const unsigned char *)buf.buf + start, *end = (const unsigned char *)buf.buf + stop;
    Py_BEGIN_ALLOW_THREADS
    int in_string = 0;
    for (; p < end; p++) {
        unsigned char c = *p;
        if (in_string) {
            if (c == '\\') p++;
            else if (c == '"' || c == '\n') in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            containers++;
        } else if (c == ',') {
            commas++;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return Py_BuildValue("(LL)", containers, commas);
}

static PyMethodDef methods[] = {
    {"too_deep", too_deep, METH_VARARGS,
     "too_deep(buf, start, stop, limit) -> bool: whether a line of buf[start:stop] nests deeper than limit."},
    {"count_items", count_items, METH_VARARGS,
     "count_items(buf, start, stop) -> (containers, commas): outside strings, in buf[start:stop]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "jsonscan", "Scans of JSON text outside its strings.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_jsonscan(void) { return PyModule_Create(&module); }
