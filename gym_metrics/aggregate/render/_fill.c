/* fill(pieces, columns, rows) -> bytes: a byte template filled row by row from columns of texts.

   Row i of the result is pieces[0] + text(columns[0], i) + pieces[1] + ... + text(columns[m-1], i)
   + pieces[m], and the rows follow each other with nothing between them. A column is a tuple
   (buffer, starts, ends) of a bytes-like buffer and two C-contiguous int64 arrays of `rows`
   entries: text(column, i) = buffer[starts[i]:ends[i]].

   Why native: the output file's group_level_metrics are ~240 bytes of JSON per rollout made of
   ~15 slices; Python's `%` formatting and join cost ~0.5 us per rollout, a memcpy loop ~0.05 us
   (BENCHMARKS.md, "Aggregation"). Only copying happens here: every text was rendered by orjson
   or numpy before, so this module knows nothing of JSON. Bounds are checked before any byte is
   copied, and the copy runs without the GIL (the background file writer runs meanwhile). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer text;
    Py_buffer starts;
    Py_buffer ends;
    int held; /* how many of the three views are held (released in that order) */
} Column;

static void release_columns(Column *cols, Py_ssize_t m) {
    for (Py_ssize_t c = 0; c < m; c++) {
        if (cols[c].held > 0) PyBuffer_Release(&cols[c].text);
        if (cols[c].held > 1) PyBuffer_Release(&cols[c].starts);
        if (cols[c].held > 2) PyBuffer_Release(&cols[c].ends);
    }
}

static int int64_view(PyObject *obj, Py_buffer *view, Py_ssize_t rows, Py_ssize_t c, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view->itemsize != 8 || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyErr_Format(PyExc_TypeError, "column %zd: %s must be an int64 array", c, what);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->len / 8 != rows) {
        PyErr_Format(PyExc_ValueError, "column %zd: %s has %zd entries, not %zd rows", c, what, view->len / 8, rows);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int open_column(PyObject *item, Column *col, Py_ssize_t rows, Py_ssize_t c) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
        PyErr_Format(PyExc_TypeError, "column %zd must be a (buffer, starts, ends) tuple", c);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 0), &col->text, PyBUF_SIMPLE) < 0) return -1;
    col->held = 1;
    if (int64_view(PyTuple_GET_ITEM(item, 1), &col->starts, rows, c, "starts") < 0) return -1;
    col->held = 2;
    if (int64_view(PyTuple_GET_ITEM(item, 2), &col->ends, rows, c, "ends") < 0) return -1;
    col->held = 3;
    return 0;
}

/* The texts' total length, or -1 (with *bad_column set) when a slice is outside its buffer. */
static Py_ssize_t texts_length(const Column *cols, Py_ssize_t m, Py_ssize_t rows, Py_ssize_t *bad_column) {
    Py_ssize_t total = 0;
    for (Py_ssize_t c = 0; c < m; c++) {
        const int64_t *s = cols[c].starts.buf, *e = cols[c].ends.buf;
        const int64_t size = (int64_t)cols[c].text.len;
        for (Py_ssize_t i = 0; i < rows; i++) {
            if (s[i] < 0 || s[i] > e[i] || e[i] > size) {
                *bad_column = c;
                return -1;
            }
            total += (Py_ssize_t)(e[i] - s[i]);
        }
    }
    return total;
}

static void copy_rows(char *out, PyObject *const *pieces, const Column *cols, Py_ssize_t m, Py_ssize_t rows) {
    for (Py_ssize_t i = 0; i < rows; i++) {
        for (Py_ssize_t c = 0; c <= m; c++) {
            Py_ssize_t n = PyBytes_GET_SIZE(pieces[c]);
            memcpy(out, PyBytes_AS_STRING(pieces[c]), (size_t)n);
            out += n;
            if (c == m) break;
            const int64_t a = ((const int64_t *)cols[c].starts.buf)[i];
            const int64_t b = ((const int64_t *)cols[c].ends.buf)[i];
            memcpy(out, (const char *)cols[c].text.buf + a, (size_t)(b - a));
            out += b - a;
        }
    }
}

static PyObject *fill(PyObject *self, PyObject *args) {
    PyObject *pieces_arg, *columns_arg;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "OOn:fill", &pieces_arg, &columns_arg, &rows)) return NULL;
    if (rows < 0) return PyErr_Format(PyExc_ValueError, "rows must be >= 0, not %zd", rows);
    PyObject *pieces = PySequence_Fast(pieces_arg, "pieces must be a sequence of bytes");
    if (!pieces) return NULL;
    PyObject *columns = PySequence_Fast(columns_arg, "columns must be a sequence of (buffer, starts, ends)");
    if (!columns) {
        Py_DECREF(pieces);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(columns);
    Column *cols = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Column));
    if (!cols) {
        PyErr_NoMemory();
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(pieces) != m + 1) {
        PyErr_Format(PyExc_ValueError, "%zd columns need %zd pieces, not %zd", m, m + 1, PySequence_Fast_GET_SIZE(pieces));
        goto done;
    }
    PyObject *const *piece = PySequence_Fast_ITEMS(pieces);
    Py_ssize_t per_row = 0;
    for (Py_ssize_t c = 0; c <= m; c++) {
        if (!PyBytes_Check(piece[c])) {
            PyErr_Format(PyExc_TypeError, "piece %zd must be bytes", c);
            goto done;
        }
        per_row += PyBytes_GET_SIZE(piece[c]);
    }
    for (Py_ssize_t c = 0; c < m; c++) {
        if (open_column(PySequence_Fast_GET_ITEM(columns, c), &cols[c], rows, c) < 0) goto done;
    }
    Py_ssize_t bad = -1, texts;
    Py_BEGIN_ALLOW_THREADS
    texts = texts_length(cols, m, rows, &bad);
    Py_END_ALLOW_THREADS
    if (texts < 0) {
        PyErr_Format(PyExc_ValueError, "column %zd: a slice lies outside its buffer", bad);
        goto done;
    }
    if (per_row && rows > (PY_SSIZE_T_MAX - texts) / per_row) {
        PyErr_SetString(PyExc_OverflowError, "the filled text would be too long");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, texts + rows * per_row);
    if (!result) goto done;
    char *out = PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    copy_rows(out, piece, cols, m, rows);
    Py_END_ALLOW_THREADS
done:
    if (cols) {
        release_columns(cols, m);
        PyMem_Free(cols);
    }
    Py_DECREF(pieces);
    Py_DECREF(columns);
    return result;
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS,
     "fill(pieces, columns, rows) -> bytes: row i is pieces[0] + columns[0][i] + pieces[1] + ... + pieces[m]; "
     "a column is (buffer, starts, ends) with int64 starts/ends, its text i = buffer[starts[i]:ends[i]]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fill", "Byte templates filled from columns of texts.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fill(void) { return PyModule_Create(&module); }
