/* recfn.native._crange: the profiler's row store and the range fast path's native half (compiled
 * builds only).
 *
 * With one plain profiler on (recfn.engine.ranges's ``_reg.plain``), ``with record_function(...)``
 * keeps the engine's stack in compiled code and makes three calls here: ``thread()`` (the
 * calling thread's engine data), ``open_row`` at the start and ``close_row`` at the end. Every
 * other row write of a native-mode Recorder (slow-path ranges, marks, memory events) goes into
 * the same ``Rows`` through its methods, so a thread has one row store and its row numbers
 * stay stable.
 *
 * A ``Rows`` holds one recorder's rows of one thread, every value exact, in 16 bytes a row: int32
 * parent, gap, span (as recfn.capture._recorder._Chunk keeps them) and label, the name and the
 * packed meta in one int32 (name << LABEL_NAME_SHIFT | meta's low 16 bits). Ids are implied by
 * the row order (a thread's ranges are numbered in order): a chunk lists only the ids that do
 * not follow the previous row's (its first row's always). Gaps and spans that do not fit, ids
 * that do not follow and wide labels (a name from LABEL_NAME_LIMIT or a depth from 255 on) are
 * escaped into int64 side arrays. Chunks hold CHUNK_ROWS rows and never move (a row's chunk is
 * its number >> CHUNK_SHIFT); a chunk's four columns are one mapped block: pages the rows have
 * not reached are never touched, so they cost no memory. decode() writes the rows into the
 * table's columns in one pass (recfn.capture._table).
 *
 * The clock is CLOCK_MONOTONIC, time.perf_counter_ns's, plus the recorder's clock offset, so
 * rows written here and by the slow path interleave exactly. Admission uses the recorder's
 * gate (events, dropped, stopped, epoch: a vec[int64] reached through the buffer protocol, as
 * recfn.native._ctrace does). Everything runs under the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recfn_constants.h" /* generated from recfn/native/constants.py */

_Static_assert(CHUNK_ROWS == (1 << CHUNK_SHIFT), "CHUNK_ROWS is 1 << CHUNK_SHIFT");

enum { C_PARENTS, C_GAPS, C_SPANS, C_LABELS, N_COLS };
/* a chunk's escapes, each an array of int64 in row order (big ends: in the order rows ended) */
enum {
    E_BIG_START_ROWS, E_BIG_STARTS, E_BIG_END_ROWS, E_BIG_ENDS, E_ID_ROWS, E_ID_VALUES,
    E_WIDE_ROWS, E_WIDE_NAMES, E_WIDE_META, N_ESCAPES
};
#define CHUNK_MASK (CHUNK_ROWS - 1)
#define LABEL_NAME_SHIFT 16
#define LABEL_NAME_LIMIT ((1 << 16) - 1)          /* names below it fit a label */
#define LABEL_META_LIMIT (((1 << 8) - 1) << 8)   /* metas below it (depth < 255) fit a label */
#define LABEL_FLAGS ((1 << META_DEPTH_SHIFT) - 1) /* meta's low byte: scope, kind, async */
#define WIDE_LABEL ((int32_t) ~(uint32_t)LABEL_FLAGS) /* all bits above the flags: escaped */
_Static_assert(META_DEPTH_SHIFT == 8, "a label keeps meta's flags in its low byte");

static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A chunk's six columns are mapped directly, page-aligned: through malloc, its header would
 * shift every column off the page boundaries and a full chunk would touch one page more (a
 * quarter byte per row). Pages are committed as the rows reach them. */
#define COLUMNS_BYTES ((size_t)N_COLS * CHUNK_ROWS * sizeof(int32_t))

static int32_t *map_columns(void) {
    void *block = mmap(NULL, COLUMNS_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    return block == MAP_FAILED ? NULL : (int32_t *)block;
}

static void unmap_columns(int32_t *cols) {
    if (cols != NULL) munmap(cols, COLUMNS_BYTES);
}

static inline int32_t low32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* -- growable int64 arrays (the escapes) ------------------------------------------------------ */

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} I64s;

/* Room for one more value (so that a row's escapes are all pushed or none). */
static int i64s_reserve(I64s *a) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? a->cap * 2 : 16;
        int64_t *v = PyMem_Realloc(a->v, (size_t)cap * sizeof(int64_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    return 0;
}

static inline void i64s_push(I64s *a, int64_t x) { a->v[a->n++] = x; } /* reserved */

typedef struct {
    int32_t *cols; /* N_COLS columns of CHUNK_ROWS int32 each, one block */
    int64_t last_start;
    uint32_t last_id; /* the low 32 bits of the last row's id */
    I64s escapes[N_ESCAPES];
} Chunk;

typedef struct {
    PyObject *key; /* what open() was given to find the row by (compared, never dereferenced) */
    int64_t row, start;
} Open;

typedef struct {
    PyObject_HEAD
    Py_buffer gate_view;
    int64_t *gate;
    Py_buffer args_view;
    int64_t *row_args; /* seq, parent seq, meta of the next open_row (the thread writes them) */
    int64_t max_events, clock_offset;
    PyObject *name_ids; /* the recorder's name -> id dict */
    PyObject *intern;   /* the recorder's _name_id: interns a new name under its lock */
    PyObject *last_name;
    int32_t last_nid;
    Chunk *chunks;
    Py_ssize_t n_chunks, cap_chunks;
    int64_t n;
    Open *open; /* rows opened by open() and not closed, innermost last, with their starts */
    Py_ssize_t n_open, cap_open;
} Rows;

static PyTypeObject RowsType;

/* -- Rows ----------------------------------------------------------------------------------- */

static int rows_init(Rows *r, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"gate",   "max_events", "clock_offset", "name_ids",
                             "intern", "row_args",   NULL};
    PyObject *gate, *name_ids, *intern, *row_args = Py_None;
    long long max_events, clock_offset;
    if (r->gate != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Rows is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLOO|O", kwlist, &gate, &max_events,
                                     &clock_offset, &name_ids, &intern, &row_args))
        return -1;
    if (!PyDict_CheckExact(name_ids)) {
        PyErr_Format(PyExc_TypeError, "name_ids must be a dict, got %.100s",
                     Py_TYPE(name_ids)->tp_name);
        return -1;
    }
    if (!PyCallable_Check(intern)) {
        PyErr_Format(PyExc_TypeError, "intern must be callable, got %.100s",
                     Py_TYPE(intern)->tp_name);
        return -1;
    }
    /* A vec marks its buffer read-only for Python, but it is the recorder's own storage of the
     * counters: they are written here as the recorder's compiled code writes them. */
    if (PyObject_GetBuffer(gate, &r->gate_view, PyBUF_FORMAT) < 0) return -1;
    if (r->gate_view.itemsize != 8 || r->gate_view.len < (Py_ssize_t)(GATE_SIZE * 8)) {
        PyBuffer_Release(&r->gate_view);
        PyErr_SetString(PyExc_ValueError, "gate must be a buffer of at least 4 int64");
        return -1;
    }
    if (row_args != Py_None) {
        if (PyObject_GetBuffer(row_args, &r->args_view, PyBUF_FORMAT) < 0) {
            PyBuffer_Release(&r->gate_view);
            return -1;
        }
        if (r->args_view.itemsize != 8 || r->args_view.len < 3 * 8) {
            PyBuffer_Release(&r->args_view);
            PyBuffer_Release(&r->gate_view);
            PyErr_SetString(PyExc_ValueError, "row_args must be a buffer of at least 3 int64");
            return -1;
        }
        r->row_args = (int64_t *)r->args_view.buf;
    }
    r->gate = (int64_t *)r->gate_view.buf;
    r->max_events = max_events;
    r->clock_offset = clock_offset;
    r->name_ids = Py_NewRef(name_ids);
    r->intern = Py_NewRef(intern);
    return 0;
}

static int rows_traverse(Rows *r, visitproc visit, void *arg) {
    Py_VISIT(r->name_ids);
    Py_VISIT(r->intern);
    if (r->gate != NULL) Py_VISIT(r->gate_view.obj);
    if (r->row_args != NULL) Py_VISIT(r->args_view.obj);
    return 0;
}

static int rows_clear(Rows *r) {
    Py_CLEAR(r->name_ids);
    Py_CLEAR(r->intern);
    Py_CLEAR(r->last_name);
    return 0;
}

static void rows_dealloc(Rows *r) {
    PyObject_GC_UnTrack(r);
    rows_clear(r);
    if (r->gate != NULL) PyBuffer_Release(&r->gate_view);
    if (r->row_args != NULL) PyBuffer_Release(&r->args_view);
    for (Py_ssize_t i = 0; i < r->n_chunks; i++) {
        Chunk *c = &r->chunks[i];
        unmap_columns(c->cols);
        for (int e = 0; e < N_ESCAPES; e++) PyMem_Free(c->escapes[e].v);
    }
    PyMem_Free(r->chunks);
    PyMem_Free(r->open);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int check_ready(Rows *r) {
    if (r->gate == NULL || r->name_ids == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Rows is not initialised");
        return -1;
    }
    return 0;
}

/* Append one open row; returns its number, or -1 with an exception set. */
static int64_t append_row(Rows *r, int64_t rid, int64_t parent, int64_t start, int32_t name,
                          int32_t meta) {
    int64_t row = r->n;
    Py_ssize_t ci = (Py_ssize_t)(row >> CHUNK_SHIFT);
    int64_t off = row & CHUNK_MASK;
    if (ci == r->n_chunks) {
        if (r->n_chunks == r->cap_chunks) {
            Py_ssize_t cap = r->cap_chunks ? r->cap_chunks * 2 : 4;
            Chunk *chunks = PyMem_Realloc(r->chunks, (size_t)cap * sizeof(Chunk));
            if (chunks == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            r->chunks = chunks;
            r->cap_chunks = cap;
        }
        int32_t *cols = map_columns();
        if (cols == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        Chunk *c = &r->chunks[ci];
        memset(c, 0, sizeof(Chunk));
        c->cols = cols;
        r->n_chunks++;
    }
    Chunk *c = &r->chunks[ci];
    int64_t gap = (int64_t)((uint64_t)start - (uint64_t)c->last_start); /* no UB: wraps */
    uint32_t id = (uint32_t)(uint64_t)rid;
    int32_t label = (int32_t)(((uint32_t)name << LABEL_NAME_SHIFT) | (uint32_t)meta);
    int big_start = off == 0 || gap < 0 || gap >= ESCAPE_LIMIT;
    int listed = off == 0 || id != c->last_id + 1u;
    int wide = !((uint32_t)name < LABEL_NAME_LIMIT && (uint32_t)meta < LABEL_META_LIMIT);
    if (big_start | listed | wide) { /* escapes: room for all of them first */
        I64s *e = c->escapes;
        if ((big_start && (i64s_reserve(&e[E_BIG_START_ROWS]) < 0 ||
                           i64s_reserve(&e[E_BIG_STARTS]) < 0)) ||
            (listed && (i64s_reserve(&e[E_ID_ROWS]) < 0 || i64s_reserve(&e[E_ID_VALUES]) < 0)) ||
            (wide && (i64s_reserve(&e[E_WIDE_ROWS]) < 0 || i64s_reserve(&e[E_WIDE_NAMES]) < 0 ||
                      i64s_reserve(&e[E_WIDE_META]) < 0)))
            return -1;
        if (big_start) {
            i64s_push(&e[E_BIG_START_ROWS], off);
            i64s_push(&e[E_BIG_STARTS], start);
            gap = ESCAPED;
        }
        if (listed) {
            i64s_push(&e[E_ID_ROWS], off);
            i64s_push(&e[E_ID_VALUES], id);
        }
        if (wide) {
            i64s_push(&e[E_WIDE_ROWS], off);
            i64s_push(&e[E_WIDE_NAMES], name);
            i64s_push(&e[E_WIDE_META], meta);
            label = WIDE_LABEL | (meta & LABEL_FLAGS);
        }
    }
    c->last_start = start;
    c->last_id = id;
    int32_t *cols = c->cols;
    cols[C_PARENTS * CHUNK_ROWS + off] = low32(parent);
    cols[C_GAPS * CHUNK_ROWS + off] = (int32_t)gap;
    cols[C_SPANS * CHUNK_ROWS + off] = 0;
    cols[C_LABELS * CHUNK_ROWS + off] = label;
    r->n = row + 1;
    return row;
}

static int set_end(Rows *r, int64_t row, int64_t start, int64_t end) {
    Chunk *c = &r->chunks[row >> CHUNK_SHIFT];
    int64_t off = row & CHUNK_MASK;
    int64_t span = (int64_t)((uint64_t)end - (uint64_t)start + 1u); /* no UB: wraps */
    if (0 < span && span < ESCAPE_LIMIT) {
        c->cols[C_SPANS * CHUNK_ROWS + off] = (int32_t)span;
        return 0;
    }
    if (i64s_reserve(&c->escapes[E_BIG_END_ROWS]) < 0 ||
        i64s_reserve(&c->escapes[E_BIG_ENDS]) < 0)
        return -1;
    i64s_push(&c->escapes[E_BIG_END_ROWS], off);
    i64s_push(&c->escapes[E_BIG_ENDS], end);
    c->cols[C_SPANS * CHUNK_ROWS + off] = ESCAPED;
    return 0;
}

static int check_row(Rows *r, int64_t row) {
    if (row < 0 || row >= r->n) {
        PyErr_Format(PyExc_ValueError, "row %lld is not in these rows (0..%lld)",
                     (long long)row, (long long)r->n - 1);
        return -1;
    }
    return 0;
}

/* The interned id of ``name``: the last name's, the dict's, or a new one from the recorder. */
static int name_id(Rows *r, PyObject *name, int32_t *out) {
    if (name == r->last_name) {
        *out = r->last_nid;
        return 0;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be a str, got %.100s", Py_TYPE(name)->tp_name);
        return -1;
    }
    PyObject *id = PyDict_GetItemWithError(r->name_ids, name); /* borrowed */
    PyObject *made = NULL;
    if (id == NULL) {
        if (PyErr_Occurred()) return -1;
        id = made = PyObject_CallOneArg(r->intern, name);
        if (id == NULL) return -1;
    }
    long v = PyLong_AsLong(id);
    Py_XDECREF(made);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "name id %ld is not an int32 >= 0", v);
        return -1;
    }
    *out = (int32_t)v;
    Py_XSETREF(r->last_name, Py_NewRef(name));
    r->last_nid = (int32_t)v;
    return 0;
}

static int as_i64(PyObject *o, const char *what, int64_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, got %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s does not fit in an int64", what);
        }
        return -1;
    }
    *out = v;
    return 0;
}

static int as_i32(PyObject *o, const char *what, int32_t *out) {
    int64_t v;
    if (as_i64(o, what, &v) < 0) return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s does not fit in an int32", what);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* Flag bits of a row's meta (its low byte, which its label keeps in place). */
static int as_flags(PyObject *o, int32_t *out) {
    if (as_i32(o, "bits", out) < 0) return -1;
    if (*out < 0 || *out > LABEL_FLAGS) {
        PyErr_Format(PyExc_ValueError, "bits must be flags of a row's meta (0..%d), got %d",
                     LABEL_FLAGS, (int)*out);
        return -1;
    }
    return 0;
}

static int check_args(const char *fn, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, nargs);
        return -1;
    }
    return 0;
}

/* Admit, intern, time and append an open row found again by ``key``: True when appended (it
 * is the last row), False when not admitted, NULL with an exception. */
static PyObject *open_core(Rows *r, PyObject *key, int64_t seq, int64_t parent, int32_t meta,
                           PyObject *name) {
    int32_t nid;
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be a str, got %.100s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    int64_t *gate = r->gate;
    if (gate[GATE_STOPPED]) Py_RETURN_FALSE;
    if (gate[GATE_EVENTS] >= r->max_events) {
        gate[GATE_DROPPED]++;
        Py_RETURN_FALSE;
    }
    gate[GATE_EVENTS]++;
    if (name_id(r, name, &nid) < 0) return NULL;
    if (r->n_open == r->cap_open) {
        Py_ssize_t cap = r->cap_open ? r->cap_open * 2 : 64;
        Open *open = PyMem_Realloc(r->open, (size_t)cap * sizeof(Open));
        if (open == NULL) return PyErr_NoMemory();
        r->open = open;
        r->cap_open = cap;
    }
    int64_t start = now_ns() + r->clock_offset;
    int64_t row = append_row(r, seq, parent, start, nid, meta);
    if (row < 0) return NULL;
    gate[GATE_EPOCH]++;
    Open *o = &r->open[r->n_open++];
    o->key = key;
    o->row = row;
    o->start = start;
    Py_RETURN_TRUE;
}

/* close_row(rows, key, bits): end the innermost open row opened with ``key``, now, and set
 * ``bits`` in its meta; nothing once stopped or when there is none (not admitted, or already
 * closed). */
static PyObject *do_close(Rows *r, PyObject *key, PyObject *bits_arg) {
    int32_t bits;
    if (check_ready(r) < 0 || as_flags(bits_arg, &bits) < 0) return NULL;
    if (r->gate[GATE_STOPPED]) Py_RETURN_NONE;
    Py_ssize_t i = r->n_open;
    while (i > 0 && r->open[i - 1].key != key) i--;
    if (i == 0) Py_RETURN_NONE;
    int64_t row = r->open[i - 1].row, start = r->open[i - 1].start;
    memmove(&r->open[i - 1], &r->open[i], (size_t)(r->n_open - i) * sizeof(Open));
    r->n_open--;
    if (set_end(r, row, start, now_ns() + r->clock_offset) < 0) return NULL;
    r->chunks[row >> CHUNK_SHIFT].cols[C_LABELS * CHUNK_ROWS + (row & CHUNK_MASK)] |= bits;
    r->gate[GATE_EPOCH]++;
    Py_RETURN_NONE;
}

/* add(rid, parent, start, name_id, meta) -> row: the slow path's append (already admitted). */
static PyObject *rows_add(Rows *r, PyObject *const *args, Py_ssize_t nargs) {
    int64_t rid, parent, start;
    int32_t name, meta;
    if (check_args("add", nargs, 5) < 0 || check_ready(r) < 0) return NULL;
    if (as_i64(args[0], "rid", &rid) < 0 || as_i64(args[1], "parent", &parent) < 0 ||
        as_i64(args[2], "start", &start) < 0 || as_i32(args[3], "name_id", &name) < 0 ||
        as_i32(args[4], "meta", &meta) < 0)
        return NULL;
    if (name < 0) {
        PyErr_SetString(PyExc_ValueError, "name_id must be >= 0");
        return NULL;
    }
    int64_t row = append_row(r, rid, parent, start, name, meta);
    return row < 0 ? NULL : PyLong_FromLongLong(row);
}

/* set_end(row, start, end): end ``row``, which started at ``start``. */
static PyObject *rows_set_end(Rows *r, PyObject *const *args, Py_ssize_t nargs) {
    int64_t row, start, end;
    if (check_args("set_end", nargs, 3) < 0 || check_ready(r) < 0) return NULL;
    if (as_i64(args[0], "row", &row) < 0 || as_i64(args[1], "start", &start) < 0 ||
        as_i64(args[2], "end", &end) < 0 || check_row(r, row) < 0)
        return NULL;
    if (set_end(r, row, start, end) < 0) return NULL;
    Py_RETURN_NONE;
}

/* or_meta(row, bits): set ``bits`` in the row's packed metadata (the async bit). */
static PyObject *rows_or_meta(Rows *r, PyObject *const *args, Py_ssize_t nargs) {
    int64_t row;
    int32_t bits;
    if (check_args("or_meta", nargs, 2) < 0 || check_ready(r) < 0) return NULL;
    if (as_i64(args[0], "row", &row) < 0 || as_flags(args[1], &bits) < 0 ||
        check_row(r, row) < 0)
        return NULL;
    r->chunks[row >> CHUNK_SHIFT].cols[C_LABELS * CHUNK_ROWS + (row & CHUNK_MASK)] |= bits;
    Py_RETURN_NONE;
}

/* A 1-D C-contiguous writable buffer of n integers of `size` bytes (bool for size 1). */
static int out_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t size, Py_ssize_t n,
                      const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') f++;
    int kind = (size == 8 && (*f == 'q' || *f == 'l')) || (size == 4 && *f == 'i') ||
               (size == 1 && (*f == 'b' || *f == '?'));
    if (!kind || f[1] != '\0' || view->itemsize != size || view->len != n * size) {
        PyErr_Format(PyExc_ValueError, "decode: %s must be %zd int%zd values", what, n,
                     size * 8);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

enum { O_ID, O_PARENT, O_START, O_END, O_NAME, O_DEPTH, O_KIND, O_SCOPE, O_ASYNC, N_OUT };
static const char *const out_names[N_OUT] = {"id",    "parent_id", "start_ns", "end_ns",  "name",
                                             "depth", "kind",      "scope",    "is_async"};
static const Py_ssize_t out_sizes[N_OUT] = {8, 8, 8, 8, 4, 4, 1, 1, 1};

/* decode(out, high): every row into the out columns, in one pass per chunk. */
static PyObject *rows_decode(Rows *r, PyObject *const *args, Py_ssize_t nargs) {
    long long high;
    if (check_args("decode", nargs, 2) < 0) return NULL;
    if (!PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != N_OUT) {
        PyErr_SetString(PyExc_TypeError, "decode(out: 9 columns, high: int)");
        return NULL;
    }
    high = PyLong_AsLongLong(args[1]);
    if (high == -1 && PyErr_Occurred()) return NULL;
    if ((high & 0xffffffffLL) != 0) {
        PyErr_SetString(PyExc_ValueError, "decode: high must have its low 32 bits clear");
        return NULL;
    }
    Py_buffer out[N_OUT];
    int got = 0;
    for (; got < N_OUT; got++)
        if (out_buffer(PyTuple_GET_ITEM(args[0], got), &out[got], out_sizes[got],
                       (Py_ssize_t)r->n, out_names[got]) < 0) {
            for (int i = 0; i < got; i++) PyBuffer_Release(&out[i]);
            return NULL;
        }
    /* restrict: the int8 columns' stores may otherwise alias everything the loop reads */
    int64_t *restrict o_id = out[O_ID].buf, *restrict o_parent = out[O_PARENT].buf;
    int64_t *restrict o_start = out[O_START].buf, *restrict o_end = out[O_END].buf;
    int32_t *restrict o_name = out[O_NAME].buf, *restrict o_depth = out[O_DEPTH].buf;
    int8_t *restrict o_kind = out[O_KIND].buf, *restrict o_scope = out[O_SCOPE].buf;
    uint8_t *restrict o_async = out[O_ASYNC].buf;
    for (Py_ssize_t ci = 0; ci < r->n_chunks; ci++) {
        const Chunk *c = &r->chunks[ci];
        int64_t base = (int64_t)ci << CHUNK_SHIFT, left = r->n - base;
        Py_ssize_t n = (Py_ssize_t)(left < CHUNK_ROWS ? left : CHUNK_ROWS);
        const int32_t *restrict parents = c->cols + C_PARENTS * CHUNK_ROWS;
        const int32_t *restrict gaps = c->cols + C_GAPS * CHUNK_ROWS;
        const int32_t *restrict spans = c->cols + C_SPANS * CHUNK_ROWS;
        const int32_t *restrict labels = c->cols + C_LABELS * CHUNK_ROWS;
        const I64s *e = c->escapes;
        const int64_t *restrict id_rows = e[E_ID_ROWS].v, *restrict id_values = e[E_ID_VALUES].v;
        const int64_t *restrict start_rows = e[E_BIG_START_ROWS].v;
        const int64_t *restrict big_starts = e[E_BIG_STARTS].v;
        const int64_t *restrict wide_rows = e[E_WIDE_ROWS].v;
        const int64_t *restrict wide_names = e[E_WIDE_NAMES].v;
        const int64_t *restrict wide_meta = e[E_WIDE_META].v;
        const Py_ssize_t n_ids = e[E_ID_ROWS].n, n_starts = e[E_BIG_START_ROWS].n;
        const Py_ssize_t n_wide = e[E_WIDE_ROWS].n;
        Py_ssize_t next_id = 0, next_start = 0, next_wide = 0;
        uint32_t id = 0;
        int64_t start = 0;
        for (Py_ssize_t off = 0; off < n; off++) {
            Py_ssize_t at = (Py_ssize_t)base + off;
            if (next_id < n_ids && id_rows[next_id] == off)
                id = (uint32_t)id_values[next_id++];
            else
                id++;
            int32_t gap = gaps[off];
            if (gap == ESCAPED && next_start < n_starts && start_rows[next_start] == off)
                start = big_starts[next_start++];
            else
                start += gap;
            int32_t span = spans[off], label = labels[off], name, meta;
            if ((label & WIDE_LABEL) == WIDE_LABEL && next_wide < n_wide &&
                wide_rows[next_wide] == off) {
                name = (int32_t)wide_names[next_wide];
                meta = ((int32_t)wide_meta[next_wide] & ~LABEL_FLAGS) | (label & LABEL_FLAGS);
                next_wide++;
            } else {
                name = (int32_t)((uint32_t)label >> LABEL_NAME_SHIFT);
                meta = label & 0xffff;
            }
            uint32_t parent = (uint32_t)parents[off];
            o_id[at] = high | (int64_t)id;
            o_parent[at] = parent ? (high | (int64_t)parent) : 0;
            o_start[at] = start;
            o_end[at] = span > 0 ? start + span - 1 : 0; /* escaped ends: below */
            o_name[at] = name;
            o_depth[at] = meta >> META_DEPTH_SHIFT;
            o_kind[at] = (int8_t)((meta >> META_KIND_SHIFT) & META_KIND_MASK);
            o_scope[at] = (int8_t)(meta & META_SCOPE_MASK);
            o_async[at] = (meta & META_ASYNC_BIT) != 0;
        }
        for (Py_ssize_t j = 0; j < e[E_BIG_END_ROWS].n; j++)
            o_end[base + e[E_BIG_END_ROWS].v[j]] = e[E_BIG_ENDS].v[j];
    }
    for (int i = 0; i < N_OUT; i++) PyBuffer_Release(&out[i]);
    Py_RETURN_NONE;
}

static Py_ssize_t rows_len(Rows *r) { return (Py_ssize_t)r->n; }

static PyMethodDef rows_methods[] = {
    {"add", (PyCFunction)(void (*)(void))rows_add, METH_FASTCALL,
     "add(rid, parent, start, name_id, meta) -> row: append an open row (admitted already)."},
    {"set_end", (PyCFunction)(void (*)(void))rows_set_end, METH_FASTCALL,
     "set_end(row, start, end): end ``row``, which started at ``start``."},
    {"or_meta", (PyCFunction)(void (*)(void))rows_or_meta, METH_FASTCALL,
     "or_meta(row, bits): set bits in the row's packed metadata."},
    {"decode", (PyCFunction)(void (*)(void))rows_decode, METH_FASTCALL,
     "decode(out, high): every row into the out columns (id, parent_id, start_ns, end_ns: "
     "int64; name, depth: int32; kind, scope: int8; is_async: bool; len() values each), ids "
     "and parents with the thread's bits ``high``, ends 0 where open."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods rows_as_sequence = {.sq_length = (lenfunc)rows_len};

static PyTypeObject RowsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._crange.Rows",
    .tp_basicsize = sizeof(Rows),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Rows(gate, max_events, clock_offset, name_ids, intern, row_args=None): one "
              "recorder's rows of one thread, 16 bytes a row (decode() reads them).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rows_init,
    .tp_traverse = (traverseproc)rows_traverse,
    .tp_clear = (inquiry)rows_clear,
    .tp_dealloc = (destructor)rows_dealloc,
    .tp_methods = rows_methods,
    .tp_as_sequence = &rows_as_sequence,
};

/* -- the calling thread's engine data ------------------------------------------------------ */

/* What the fast path keeps per thread, in one thread-local (one TLS lookup per call):
 * - td: the thread's engine data, a strong reference owned by a capsule in the thread state's
 *   dict: when the thread state is cleared (the thread ends), the capsule's destructor forgets
 *   it before releasing it, so no finalizer running later on the thread finds it freed;
 * - id: the thread state it belongs to (PyThreadState_GetID);
 * - args: td.row_args' items (the vec is never resized or replaced, and td keeps it): thread()
 *   sets ROW_ARGS_LOOP to whether an asyncio event loop runs on the thread (2: and the task
 *   stack last claimed on it is private to the running context);
 * - holder, running (Python < 3.12): the last running-loop holder asyncio stored in the thread
 *   state's dict (a strong reference: a new holder is never mistaken for it) and whether
 *   asyncio said a loop runs while it is there. asyncio makes a new holder whenever a loop
 *   starts or stops, and its answer for one holder only changes in a forked child (it compares
 *   the pid, a system call each time), where the cache is reset. */
typedef struct {
    PyObject *td;
    uint64_t id;
    int64_t *args;
#if PY_VERSION_HEX < 0x030C0000
    PyObject *holder;
    int running;
    uint64_t state_version; /* the thread state dict's version when running was last read */
#endif
} Here;
/* initial-exec: no __tls_get_addr call per access (a few dozen bytes of the static TLS that
 * the loader keeps for modules opened later; if it were ever short, importing this module
 * fails and the engine keeps its slow path). */
static _Thread_local Here here __attribute__((tls_model("initial-exec")));
static const char *const THREAD_KEY = "recfn.native._crange.thread";
static PyObject *loop_probe;  /* asyncio's _get_running_loop, once asyncio is imported */
static PyObject *events_name; /* "asyncio.events" */
#if PY_VERSION_HEX < 0x030C0000
static int probe_is_native;   /* loop_probe is _asyncio's: it keeps the holder in the dict */
static PyObject *holder_key;  /* "__asyncio_running_event_loop__" */
/* sys.modules as it was when asyncio.events was last missing from it: while its version tag
 * is unchanged, asyncio is still not imported, with no lookup. */
static PyObject *missing_in; /* compared, never dereferenced */
static uint64_t missing_version;

static void forget_holder_in_child(void) {
    here.holder = NULL; /* its reference is left behind: no Python call in an atfork handler */
    here.state_version = 0;
}
#endif

/* asyncio._get_running_loop() is not None: 1, 0, or -1 with an exception. */
static int ask_asyncio(void) {
    PyObject *loop = PyObject_CallNoArgs(loop_probe);
    if (loop == NULL) return -1;
    int running = loop != Py_None;
    Py_DECREF(loop);
    return running;
}

/* Whether an asyncio event loop runs on the calling thread: 1, 0, -1 with an exception, 2
 * when sys.modules was replaced by something that is not a dict (the slow path asks). */
static int loop_running(void) {
    if (loop_probe == NULL) {
        PyObject *modules = PyImport_GetModuleDict();
        if (!PyDict_Check(modules)) return 2;
#if PY_VERSION_HEX < 0x030C0000
        uint64_t version = ((PyDictObject *)modules)->ma_version_tag;
        if (modules == missing_in && version == missing_version) return 0;
#endif
        PyObject *events = PyDict_GetItemWithError(modules, events_name);
        if (events == NULL) {
            if (PyErr_Occurred()) return -1;
#if PY_VERSION_HEX < 0x030C0000
            missing_in = modules;
            missing_version = version;
#endif
            return 0; /* asyncio never imported: no loop can be running */
        }
        loop_probe = PyObject_GetAttrString(events, "_get_running_loop");
        if (loop_probe == NULL) return -1;
#if PY_VERSION_HEX < 0x030C0000
        probe_is_native = PyCFunction_Check(loop_probe);
#endif
    }
#if PY_VERSION_HEX < 0x030C0000
    if (probe_is_native) {
        PyObject *state = PyThreadState_GetDict();
        if (state == NULL) return 0;
        /* Dict versions are unique across dicts and changes: the same one, nothing changed. */
        uint64_t version = ((PyDictObject *)state)->ma_version_tag;
        if (version == here.state_version) return here.running;
        PyObject *holder = PyDict_GetItemWithError(state, holder_key);
        if (holder == NULL) {
            if (PyErr_Occurred()) return -1;
            Py_CLEAR(here.holder); /* no loop ever ran here */
            here.running = 0;
        }
        else if (holder != here.holder) {
            int running = ask_asyncio();
            if (running < 0) return -1;
            Py_XSETREF(here.holder, Py_NewRef(holder));
            here.running = running;
        }
        here.state_version = version;
        return here.running;
    }
#endif
    return ask_asyncio();
}

static int claimed_is_private(PyObject *var);

static PyObject *m_thread(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    PyObject *td = here.td;
    if (td == NULL || here.id != PyThreadState_GetID(PyThreadState_Get())) Py_RETURN_NONE;
    int running = loop_running();
    if (running < 0) return NULL;
    if (running > 1) Py_RETURN_NONE;
    /* In a loop, 2 when the stack this thread last claimed is current and private to its
     * context (private_value would return it): the engine pushes on it without asking. */
    here.args[ROW_ARGS_LOOP] = running && claimed_is_private(NULL) ? 2 : running;
    return Py_NewRef(td);
}

static PyObject *m_in_loop(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    int running = loop_running();
    if (running < 0) return NULL;
    if (running > 1) { /* sys.modules is not a dict: ask asyncio if it is there */
        PyObject *events = PyImport_GetModule(events_name);
        if (events == NULL) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_FALSE;
        }
        PyObject *loop = PyObject_CallMethod(events, "_get_running_loop", NULL);
        Py_DECREF(events);
        if (loop == NULL) return NULL;
        running = loop != Py_None;
        Py_DECREF(loop);
    }
    return PyBool_FromLong(running);
}

/* The part of a contextvars.Context that private_value reads, as CPython 3.11-3.13 lay it out
 * (not public API: PyInit__crange checks it on probe contexts first). ctx_vars is the HAMT of
 * its values: every ContextVar.set in the context replaces it, and a copy of the context shares
 * it (one more reference) until either sets a value. */
typedef struct {
    PyObject_HEAD
    PyObject *ctx_prev;
    PyObject *ctx_vars;
} ContextLayout;

/* What claim() recorded on this thread: the context, its values then (a strong reference, so
 * that no later HAMT can have its address), the ContextVar and its value (borrowed: the HAMT
 * holds it). */
typedef struct {
    PyObject *ctx;
    PyObject *vars;
    PyObject *var;
    PyObject *value;
    int release_at_exit; /* the thread state's dict holds a capsule that clears this */
} Claimed;
static _Thread_local Claimed claimed __attribute__((tls_model("initial-exec")));
static const char *const CLAIMED_KEY = "recfn.native._crange.claimed";

/* The capsule's destructor, as a thread's state is cleared: on that thread, it drops the
 * claim; where another thread clears it (the thread and its thread-local are gone), the claim's
 * reference is left behind rather than read from freed memory. */
static void forget_claim(PyObject *capsule) {
    if (PyCapsule_GetPointer(capsule, CLAIMED_KEY) != &claimed) {
        PyErr_Clear();
        return;
    }
    claimed.ctx = claimed.var = claimed.value = NULL;
    Py_CLEAR(claimed.vars);
    claimed.release_at_exit = 0;
}

/* private_value(var): var's value in the running context when claim(var) made it current there
 * and nothing can have seen it since: the context is the same, none of its ContextVars was set
 * (its HAMT is the same one) and no copy of it holds that HAMT (a copy takes a reference; a
 * task made, a callback scheduled or contextvars.copy_context() each make one). The engine
 * then changes the value in place; None otherwise. */
static PyObject *m_private_value(PyObject *Py_UNUSED(m), PyObject *var) {
    if (!claimed_is_private(var)) Py_RETURN_NONE;
    return Py_NewRef(claimed.value);
}

/* Whether the value claimed on this thread (of `var`; NULL: whichever) is private_value's. */
static int claimed_is_private(PyObject *var) {
    PyObject *ctx = PyThreadState_Get()->context;
    if (ctx == NULL || ctx != claimed.ctx || claimed.var == NULL) return 0;
    if (var != NULL && var != claimed.var) return 0;
    PyObject *vars = ((ContextLayout *)ctx)->ctx_vars;
    return vars == claimed.vars && Py_REFCNT(vars) == 2; /* the context's reference and ours */
}

/* claim(var): remember var's value, just set in the running context, for private_value. */
static PyObject *m_claim(PyObject *Py_UNUSED(m), PyObject *var) {
    if (!PyContextVar_CheckExact(var)) {
        PyErr_SetString(PyExc_TypeError, "claim needs a contextvars.ContextVar");
        return NULL;
    }
    PyObject *ctx = PyThreadState_Get()->context, *value = NULL;
    if (PyContextVar_Get(var, NULL, &value) < 0) return NULL;
    if (!claimed.release_at_exit) {
        PyObject *state = PyThreadState_GetDict();
        PyObject *capsule = state == NULL ? NULL : PyCapsule_New(&claimed, CLAIMED_KEY, forget_claim);
        if (capsule == NULL || PyDict_SetItemString(state, CLAIMED_KEY, capsule) < 0) {
            Py_XDECREF(capsule);
            Py_XDECREF(value);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "claim: the thread state has no dict");
            return NULL;
        }
        Py_DECREF(capsule);
        claimed.release_at_exit = 1;
    }
    if (ctx == NULL || value == NULL) {
        claimed.ctx = claimed.var = claimed.value = NULL;
        Py_CLEAR(claimed.vars);
    } else {
        Py_XSETREF(claimed.vars, Py_NewRef(((ContextLayout *)ctx)->ctx_vars));
        claimed.ctx = ctx;
        claimed.var = var;
        claimed.value = value;
    }
    Py_XDECREF(value); /* the context's values hold it */
    Py_RETURN_NONE;
}

static PyObject *m_current_context(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    PyObject *ctx = PyThreadState_Get()->context;
    return Py_NewRef(ctx != NULL ? ctx : Py_None);
}

/* Whether ContextLayout reads contexts as this CPython lays them out: a copy shares its HAMT, a
 * set in it replaces its own with one that only it holds. 1, 0, or -1 with an error. */
static int context_layout_holds(void) {
#ifdef Py_GIL_DISABLED
    return 0; /* reference counts are not single numbers there */
#else
    int holds = -1;
    PyObject *ctx = PyContext_New(), *copy = NULL, *var = NULL, *token = NULL;
    if (ctx == NULL || (copy = PyContext_Copy(ctx)) == NULL ||
        (var = PyContextVar_New("recfn_context_probe", NULL)) == NULL)
        goto done;
    PyObject *shared = ((ContextLayout *)ctx)->ctx_vars;
    holds = shared != NULL && shared == ((ContextLayout *)copy)->ctx_vars &&
            strcmp(Py_TYPE(shared)->tp_name, "hamt") == 0 && Py_REFCNT(shared) >= 2;
    if (!holds) goto done;
    if (PyContext_Enter(copy) < 0) {
        holds = -1;
        goto done;
    }
    token = PyContextVar_Set(var, Py_None);
    PyObject *own = ((ContextLayout *)copy)->ctx_vars;
    holds = token != NULL && own != shared && Py_TYPE(own) == Py_TYPE(shared) &&
            Py_REFCNT(own) == 1 && PyThreadState_Get()->context == copy;
    if (PyContext_Exit(copy) < 0 || token == NULL) holds = -1;
done:
    Py_XDECREF(token);
    Py_XDECREF(var);
    Py_XDECREF(copy);
    Py_XDECREF(ctx);
    return holds;
#endif
}

static PyMethodDef context_defs[] = {
    {"private_value", m_private_value, METH_O,
     "private_value(var) -> object: var's value when claim(var) made it current in the running "
     "context and no other context can have seen it since (no copy of the context holds its "
     "values, none was set), else None."},
    {"claim", m_claim, METH_O,
     "claim(var): remember var's value, just set in the running context, for private_value."},
    {"current_context", m_current_context, METH_NOARGS,
     "current_context() -> Context: the running contextvars.Context itself (not a copy)."},
    {NULL, NULL, 0, NULL},
};

static void release_thread_data(PyObject *capsule) {
    PyObject *td = PyCapsule_GetPointer(capsule, THREAD_KEY);
    if (td == NULL) {
        PyErr_Clear();
        return;
    }
    if (here.td == td) { /* cleared on its own thread (another thread's cache is its own) */
        here.td = NULL;
        here.args = NULL;
#if PY_VERSION_HEX < 0x030C0000
        Py_CLEAR(here.holder);
        here.state_version = 0;
#endif
    }
    Py_DECREF(td);
}

static PyObject *m_set_thread(PyObject *Py_UNUSED(m), PyObject *td) {
    PyObject *vector = PyObject_GetAttrString(td, "row_args");
    if (vector == NULL) return NULL;
    Py_buffer view;
    int got = PyObject_GetBuffer(vector, &view, PyBUF_FORMAT);
    Py_DECREF(vector);
    if (got < 0) return NULL;
    int fits = view.itemsize == 8 && view.len >= (ROW_ARGS_LOOP + 1) * 8;
    int64_t *items = (int64_t *)view.buf;
    PyBuffer_Release(&view);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "td.row_args must be a buffer of at least 4 int64");
        return NULL;
    }
    PyObject *state = PyThreadState_GetDict();
    if (state == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_thread: the thread state has no dict");
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(Py_NewRef(td), THREAD_KEY, release_thread_data);
    if (capsule == NULL) {
        Py_DECREF(td);
        return NULL;
    }
    /* Replacing an earlier capsule releases that one's data first (and forgets it). */
    int stored = PyDict_SetItemString(state, THREAD_KEY, capsule);
    Py_DECREF(capsule);
    if (stored < 0) return NULL;
    here.td = td;
    here.id = PyThreadState_GetID(PyThreadState_Get());
    here.args = items;
    Py_RETURN_NONE;
}

static PyObject *m_open_row(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (check_args("open_row", nargs, 3) < 0) return NULL;
    if (!Py_IS_TYPE(args[0], &RowsType)) {
        PyErr_Format(PyExc_TypeError, "open_row needs a Rows, got %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    Rows *r = (Rows *)args[0];
    if (check_ready(r) < 0) return NULL;
    int64_t *a = r->row_args;
    if (a == NULL) {
        PyErr_SetString(PyExc_ValueError, "open_row needs a Rows made with row_args");
        return NULL;
    }
    if (a[2] < INT32_MIN || a[2] > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "meta does not fit in an int32");
        return NULL;
    }
    return open_core(r, args[1], a[0], a[1], (int32_t)a[2], args[2]);
}

static PyObject *m_close_row(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (check_args("close_row", nargs, 3) < 0) return NULL;
    if (!Py_IS_TYPE(args[0], &RowsType)) {
        PyErr_Format(PyExc_TypeError, "close_row needs a Rows, got %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    return do_close((Rows *)args[0], args[1], args[2]);
}

/* -- repeated(): a constant column without fresh memory ---------------------------------------- */

/* A read-only buffer of nbytes repeating one value of 1, 2, 4 or 8 bytes: one piece of shared
 * memory, filled once, mapped over and over across one reserved address range. A table's
 * constant columns (its pid, the -1 of rows without a sequence number, the one thread's id)
 * then cost neither the writes nor the fresh pages of n values (about 3 ns a value here), and
 * reading one reads the same few pages again. Linux only (memfd_create); elsewhere, or where
 * the system refuses, it raises OSError and the caller writes the values. */
typedef struct {
    PyObject_HEAD
    void *base;    /* the reserved range, every piece mapped into it */
    size_t mapped; /* its length: nbytes rounded up to whole pieces */
    Py_ssize_t nbytes;
} Repeated;

#define REPEATED_MIN_PIECE ((size_t)256 << 10)
#define REPEATED_MAX_PIECE ((size_t)4 << 20)

static int repeated_getbuffer(Repeated *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->base, self->nbytes, 1, flags);
}

static void repeated_dealloc(Repeated *self) {
    if (self->base != NULL) munmap(self->base, self->mapped);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t repeated_length(Repeated *self) { return self->nbytes; }

static PyBufferProcs repeated_as_buffer = {.bf_getbuffer = (getbufferproc)repeated_getbuffer};
static PySequenceMethods repeated_as_sequence = {.sq_length = (lenfunc)repeated_length};

static PyTypeObject RepeatedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._crange.Repeated",
    .tp_basicsize = sizeof(Repeated),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only buffer repeating one value (made by repeated()).",
    .tp_dealloc = (destructor)repeated_dealloc,
    .tp_as_buffer = &repeated_as_buffer,
    .tp_as_sequence = &repeated_as_sequence,
};

static PyObject *m_repeated(PyObject *Py_UNUSED(m), PyObject *args) {
    Py_buffer value;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "y*n:repeated", &value, &nbytes)) return NULL;
    Py_ssize_t width = value.len;
    PyObject *made = NULL;
    if (!(width == 1 || width == 2 || width == 4 || width == 8) || nbytes <= 0 ||
        nbytes % width != 0) {
        PyErr_Format(PyExc_ValueError,
                     "repeated(value, nbytes) needs a value of 1, 2, 4 or 8 bytes and a positive "
                     "nbytes that is a multiple of it (got %zd and %zd)",
                     width, nbytes);
        goto done;
    }
#if defined(__linux__) && defined(MFD_CLOEXEC)
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t piece = (size_t)nbytes / 16;
    piece = piece < REPEATED_MIN_PIECE ? REPEATED_MIN_PIECE
            : piece > REPEATED_MAX_PIECE ? REPEATED_MAX_PIECE
                                         : piece;
    piece -= piece % page; /* a page is a multiple of every width */
    size_t mapped = ((size_t)nbytes + piece - 1) / piece * piece;
    int fd = memfd_create("recfn-constant", MFD_CLOEXEC);
    if (fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    char *fill = MAP_FAILED, *base = MAP_FAILED;
    if (ftruncate(fd, (off_t)piece) != 0) goto failed;
    fill = mmap(NULL, piece, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fill == MAP_FAILED) goto failed;
    for (size_t at = 0; at < piece; at += (size_t)width) memcpy(fill + at, value.buf, (size_t)width);
    munmap(fill, piece);
    /* the range is reserved first, so that the pieces land side by side */
    base = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) goto failed;
    for (size_t at = 0; at < mapped; at += piece)
        if (mmap(base + at, piece, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
            goto failed;
    close(fd);
    Repeated *r = PyObject_New(Repeated, &RepeatedType);
    if (r == NULL) {
        munmap(base, mapped);
        goto done;
    }
    r->base = base;
    r->mapped = mapped;
    r->nbytes = nbytes;
    made = (PyObject *)r;
    goto done;
failed:
    PyErr_SetFromErrno(PyExc_OSError);
    if (base != MAP_FAILED) munmap(base, mapped);
    close(fd);
#else
    PyErr_SetString(PyExc_OSError, "repeated() maps shared memory with memfd_create (Linux)");
#endif
done:
    PyBuffer_Release(&value);
    return made;
}

static PyMethodDef module_methods[] = {
    {"thread", m_thread, METH_NOARGS,
     "thread() -> the calling thread's engine data, or None (an unknown thread: take the slow "
     "path); sets td.row_args[3] to whether an asyncio event loop runs on the thread."},
    {"in_loop", m_in_loop, METH_NOARGS,
     "in_loop() -> bool: whether an asyncio event loop runs on the calling thread (as "
     "asyncio.events._get_running_loop() is not None, without its system call per question "
     "on Python 3.11)."},
    {"set_thread", m_set_thread, METH_O,
     "set_thread(td): remember the calling thread's engine data and its row_args buffer (the "
     "engine keeps both alive for the thread)."},
    {"open_row", (PyCFunction)(void (*)(void))m_open_row, METH_FASTCALL,
     "open_row(rows, key, name) -> bool: admit, intern, time and append an open row (the last "
     "one; False when the recorder stopped or is full), with seq, parent seq and meta read from "
     "the Rows' row_args buffer (written by the thread, so nothing is boxed)."},
    {"close_row", (PyCFunction)(void (*)(void))m_close_row, METH_FASTCALL,
     "close_row(rows, key, bits): end the innermost row open_row opened with key, now, and "
     "set bits in its meta (nothing once stopped, or when there is none)."},
    {"repeated", m_repeated, METH_VARARGS,
     "repeated(value, nbytes) -> Repeated: a read-only buffer of nbytes repeating value (1, 2, "
     "4 or 8 bytes), its pages shared: a constant column without fresh memory (OSError where "
     "the system cannot map it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "recfn.native._crange",
    .m_doc = "The profiler's native row store and the range fast path's C half.", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__crange(void) {
    if (PyType_Ready(&RowsType) < 0 || PyType_Ready(&RepeatedType) < 0)
        return NULL;
    events_name = PyUnicode_InternFromString("asyncio.events");
    if (events_name == NULL) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    holder_key = PyUnicode_InternFromString("__asyncio_running_event_loop__");
    if (holder_key == NULL) return NULL;
    if (pthread_atfork(NULL, NULL, forget_holder_in_child) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Rows", (PyObject *)&RowsType) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_ROWS", (long)CHUNK_ROWS) < 0 ||
        PyModule_AddIntConstant(m, "ESCAPE_LIMIT", (long)ESCAPE_LIMIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    int holds = context_layout_holds();
    if (holds > 0 && PyModule_AddFunctions(m, context_defs) < 0) holds = -1;
    if (holds < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
