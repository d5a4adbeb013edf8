/* The out-of-core summary's one pass over a process's rows (recfn/native/_csummary.c).

   A process's rows as recorded are summarised in one pass, a row group at a time. "As
   recorded": the rows fall into a few blocks (a capture's threads), each a run of rows whose
   starts are in order, made of segments, runs of rows whose ids count up by one (a thread's
   ranges and the calls traced on it, merged by start, are two interleaved id sequences); every
   parent comes before its children, and a parent that is a closed range lies in its children's
   block. Then: each closed range adds to
   its group's count, durations, minimum and maximum; its self time is its duration less the
   union of its direct children's intervals clipped to its own (children meet their parent in
   start order, so the union is the part of each child past the furthest end of the children
   before it); and its duration counts in its group's total only when no closed ancestor is of
   its group (the recursion rule). "Closed ancestor" follows parents while they are closed
   ranges, as recfn.analysis.stats.tree.linked_parents does.

   Per row the pass keeps 8 bytes that a later child may ask of it: its group, its closed
   parent, and a 12-bit set of its ancestors' groups (hashed, so a miss proves no ancestor of
   the group and a hit is checked by walking up). A closed range's end and the furthest end of
   its children so far matter only until a later row starts past its end: they live in a ring of
   the latest rows' slots (`recent`, where most children find their parent in one load) and,
   for ranges still open when their slot is taken, a small table swept as it fills (`Open`).

   Rows not in that order are not summarised here: `add` or `finish` returns NOT_RECORDED and
   the caller takes the general (numpy) path, which is also the pure build's, and the
   reference; so do ids that repeat, parents that cycle, and a closed parent in another thread
   (a block before: its children's intervals would meet out of start order). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif

#define OK 0
#define NOT_RECORDED 1 /* ids not counting up, starts not in order, a parent after its child */
#define ENDS_BEFORE_START 2 /* bad: the id of a range that ends before it starts */
#define DANGLING_PARENT 3   /* bad: a parent_id that is no row's id (whole files only) */
#define NO_MEMORY (-2)
#define MAX_SEGMENTS 65536 /* more: not as recorded (a shuffled file), the numpy path */
/* Segments are kept sorted by first id as they come, moving the later ones up: many segments
   that each land among the others (a thread's ranges and traced calls taking turns at every
   call) would make that quadratic, so past this many moves per row so far, plus a base, the
   rows go to the numpy path, as before such threads were taken. */
#define MOVES_PER_ROW 4
#define MOVES_BASE (1 << 20)

/* What a later child may ask of any row, in 8 bytes (10M rows: 80 MB, where 12 took 120). */
typedef struct {
    uint32_t tag; /* low CODE_BITS: its group, NO_GROUP when it is not a closed range; the
                     ABOVE_BITS above them: its closed ancestors' groups, hashed to one bit each */
    int32_t link; /* its parent when that is a closed range, else -1 */
} Row;

#define CODE_BITS 20
#define ABOVE_BITS (32 - CODE_BITS)
#define NO_GROUP ((1u << CODE_BITS) - 1)
#define MAX_GROUPS ((Py_ssize_t)NO_GROUP) /* more groups than this: NOT_RECORDED (numpy path) */

static inline int32_t code_of(const Row *r) {
    uint32_t code = r->tag & NO_GROUP;
    return code == NO_GROUP ? -1 : (int32_t)code;
}

static inline uint32_t above_of(const Row *r) { return r->tag >> CODE_BITS; }

#define RECENT 4096 /* a power of two */

/* A closed range whose end a later row may still start before. */
typedef struct {
    int32_t row;  /* -1: an empty slot */
    int32_t span; /* a profiler span: its self time is left out of the total */
    int64_t end;
    int64_t reach; /* the furthest end of its children so far, clipped to its own */
} Open;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, at;
    int whole;
    int64_t prev_id, last_start, low, high, bad;
    /* segments: runs of rows whose ids count up by one, within a block (starts in order) */
    int64_t *seg_first, *seg_last; /* their ids */
    Py_ssize_t *seg_base;          /* the position of each one's first row */
    int32_t *seg_sorted;           /* the segments by first id */
    Py_ssize_t segments, seg_capacity;
    Py_ssize_t block_base; /* the position of the current block's first row */
    Py_ssize_t seg_hit;    /* the segment the last searched lookup found */
    int64_t moved;         /* segments moved up to keep them sorted, in all */
    /* parents not found among the rows before their child, in row order */
    int64_t *unresolved;
    Py_ssize_t unresolved_n, unresolved_capacity;
    Row *rows;
    size_t rows_bytes; /* its mapping's size */
    Open *recent; /* the open range of row r, if any, in slot r % RECENT */
    Open *open;   /* those still open when a later row took their slot in `recent` */
    Py_ssize_t open_capacity, open_used; /* a power of two; slots taken */
    int64_t *own_out, *took_out; /* per row, self time and duration, when asked (keep_rows) */
    /* per group */
    Py_ssize_t groups, capacity;
    int64_t *count, *duration, *self_time, *total, *minimum, *maximum;
    int64_t self_total, extent_first, extent_last;
} Pass;

/* The rows' state: large, written once in order (a row before any later row reads it), so on
   Linux in huge pages where the system allows (a tenth of the page faults' time). A mapping a
   finished pass frees is kept for the next passes (up to SPARES of them, SPARE_BYTES in all):
   a run set's files are read one after another and each pass wants about the same size, where
   a fresh mapping's pages are zeroed by the kernel as they are first written. MADV_FREE lets
   the system take a kept mapping's pages back first when memory is short. Spares are taken and
   given with the GIL held (a pass is made and freed under it). */
#define SPARES 4
#define SPARE_BYTES ((size_t)256 << 20)

#if defined(MAP_ANONYMOUS) && !defined(_WIN32)
static struct {
    void *at;
    size_t bytes;
} spares[SPARES];
static size_t spare_bytes;

static Row *rows_alloc(size_t bytes, size_t *mapped) {
    int best = -1;
    for (int s = 0; s < SPARES; s++) /* the smallest spare that holds the rows, up to twice */
        if (spares[s].at != NULL && spares[s].bytes >= bytes && spares[s].bytes / 2 <= bytes &&
            (best < 0 || spares[s].bytes < spares[best].bytes))
            best = s;
    if (best >= 0) {
        void *found = spares[best].at;
        *mapped = spares[best].bytes;
        spare_bytes -= spares[best].bytes;
        spares[best].at = NULL;
        return found;
    }
    void *found = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (found == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(found, bytes, MADV_HUGEPAGE);
#endif
    *mapped = bytes;
    return found;
}

static void rows_free(Row *rows, size_t mapped) {
    if (rows == NULL) return;
    if (mapped > SPARE_BYTES) {
        munmap(rows, mapped);
        return;
    }
    int slot = 0; /* an empty slot, else the largest spare's */
    for (int s = 0; s < SPARES; s++) {
        if (spares[s].at == NULL) {
            slot = s;
            break;
        }
        if (spares[s].bytes > spares[slot].bytes) slot = s;
    }
    for (int s = slot, more = 1; more; s = (s + 1) % SPARES) { /* then others, within budget */
        if (spares[s].at != NULL) {
            munmap(spares[s].at, spares[s].bytes);
            spare_bytes -= spares[s].bytes;
            spares[s].at = NULL;
        }
        more = spare_bytes + mapped > SPARE_BYTES;
    }
#ifdef MADV_FREE
    madvise(rows, mapped, MADV_FREE);
#endif
    spares[slot].at = rows;
    spares[slot].bytes = mapped;
    spare_bytes += mapped;
}
#else
static Row *rows_alloc(size_t bytes, size_t *mapped) {
    *mapped = bytes;
    return PyMem_Malloc(bytes);
}

static void rows_free(Row *rows, size_t mapped) {
    (void)mapped;
    PyMem_Free(rows);
}
#endif

static void Pass_dealloc(Pass *self) {
    rows_free(self->rows, self->rows_bytes);
    PyMem_RawFree(self->recent);
    PyMem_RawFree(self->open);
    PyMem_RawFree(self->seg_first);
    PyMem_RawFree(self->seg_last);
    PyMem_RawFree(self->seg_base);
    PyMem_RawFree(self->seg_sorted);
    PyMem_RawFree(self->unresolved);
    PyMem_Free(self->own_out);
    PyMem_Free(self->took_out);
    PyMem_Free(self->count);
    PyMem_Free(self->duration);
    PyMem_Free(self->self_time);
    PyMem_Free(self->total);
    PyMem_Free(self->minimum);
    PyMem_Free(self->maximum);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Pass_init(Pass *self, PyObject *args, PyObject *kwds) {
    Py_ssize_t n;
    int whole, keep_rows;
    static char *names[] = {"n", "whole", "keep_rows", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "npp", names, &n, &whole, &keep_rows))
        return -1;
    if (n < 0 || n >= INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "a pass holds 0 to %d rows, not %zd", INT32_MAX - 1, n);
        return -1;
    }
    if (self->rows != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Pass is initialised once");
        return -1;
    }
    size_t rows = n ? (size_t)n : 1;
    self->n = n;
    self->whole = whole;
    self->rows = rows_alloc(rows * sizeof(Row), &self->rows_bytes);
    self->open_capacity = 1024;
    self->open = PyMem_RawMalloc(self->open_capacity * sizeof(Open));
    if (self->open != NULL)
        for (Py_ssize_t s = 0; s < self->open_capacity; s++) self->open[s].row = -1;
    self->recent = PyMem_RawMalloc(RECENT * sizeof(Open));
    if (self->recent != NULL)
        for (Py_ssize_t s = 0; s < RECENT; s++) self->recent[s].row = -1;
    if (keep_rows) {
        self->own_out = PyMem_Calloc(rows, sizeof(int64_t));
        self->took_out = PyMem_Malloc(rows * sizeof(int64_t));
    }
    if (!self->rows || !self->open || !self->recent || (keep_rows && (!self->own_out || !self->took_out))) {
        PyErr_NoMemory();
        return -1;
    }
    self->extent_first = INT64_MAX;
    self->extent_last = INT64_MIN;
    self->low = INT64_MAX;
    self->high = INT64_MIN;
    return 0;
}

static int grow(Pass *self, Py_ssize_t wanted) {
    if (wanted <= self->capacity) return 0;
    Py_ssize_t capacity = self->capacity ? self->capacity : 64;
    while (capacity < wanted) capacity *= 2;
    int64_t **arrays[] = {&self->count, &self->duration, &self->self_time,
                          &self->total, &self->minimum, &self->maximum};
    for (int a = 0; a < 6; a++) {
        int64_t *grown = PyMem_Realloc(*arrays[a], (size_t)capacity * sizeof(int64_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        int64_t fill = a == 4 ? INT64_MAX : a == 5 ? INT64_MIN : 0;
        for (Py_ssize_t g = self->capacity; g < capacity; g++) grown[g] = fill;
        *arrays[a] = grown;
    }
    self->capacity = capacity;
    return 0;
}

typedef struct {
    Py_buffer view;
    int held;
} Held;

/* ``obj`` as a C-contiguous buffer of ``rows`` items of ``size`` bytes (None allowed when
   ``optional``: then buf is NULL). */
static int hold(PyObject *obj, Py_ssize_t size, Py_ssize_t rows, int optional, const char *what,
                Held *out) {
    out->held = 0;
    out->view.buf = NULL;
    if (obj == Py_None && optional) return 0;
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    out->held = 1;
    if (out->view.itemsize != size || out->view.len != size * rows) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items of %zd bytes wanted", what, rows, size);
        return -1;
    }
    return 0;
}

/* A group's bit among ABOVE_BITS (a multiplicative hash scaled to their number). */
static uint32_t bit_of(int32_t code) {
    uint32_t hashed = (uint32_t)code * 2654435761u;
    return (uint32_t)1 << (uint32_t)(((uint64_t)hashed * ABOVE_BITS) >> 32);
}

static Py_ssize_t slot_of(int32_t row, Py_ssize_t capacity) {
    return (Py_ssize_t)(((uint32_t)row * 2654435761u) & (uint32_t)(capacity - 1));
}

/* The open range of ``row``, or NULL: ended before the current start (swept) or never open. */
static Open *find_open(Pass *self, int32_t row) {
    Open *recent = &self->recent[row & (RECENT - 1)];
    if (recent->row == row) return recent;
    Py_ssize_t mask = self->open_capacity - 1;
    for (Py_ssize_t s = slot_of(row, self->open_capacity);; s = (s + 1) & mask) {
        Open *slot = &self->open[s];
        if (slot->row == row) return slot;
        if (slot->row < 0) return NULL;
    }
}

/* Keep only the ranges that end after ``now`` (no later row starts before ``now``), in a
   table at most a quarter full afterwards. */
static int sweep(Pass *self, int64_t now) {
    Py_ssize_t kept = 0, old_capacity = self->open_capacity;
    Open *old = self->open;
    for (Py_ssize_t s = 0; s < old_capacity; s++)
        if (old[s].row >= 0 && old[s].end > now) kept++;
    Py_ssize_t capacity = old_capacity;
    while (kept * 4 > capacity) capacity *= 2;
    Open *table = PyMem_RawMalloc((size_t)capacity * sizeof(Open));
    if (table == NULL) return -1;
    for (Py_ssize_t s = 0; s < capacity; s++) table[s].row = -1;
    for (Py_ssize_t s = 0; s < old_capacity; s++) {
        if (old[s].row < 0 || old[s].end <= now) continue;
        Py_ssize_t at = slot_of(old[s].row, capacity);
        while (table[at].row >= 0) at = (at + 1) & (capacity - 1);
        table[at] = old[s];
    }
    PyMem_RawFree(old);
    self->open = table;
    self->open_capacity = capacity;
    self->open_used = kept;
    return 0;
}

static int keep_open(Pass *self, Open range, int64_t now) {
    if ((self->open_used + 1) * 2 > self->open_capacity && sweep(self, now) < 0) return -1;
    Py_ssize_t mask = self->open_capacity - 1, s = slot_of(range.row, self->open_capacity);
    while (self->open[s].row >= 0) s = (s + 1) & mask;
    self->open[s] = range;
    self->open_used++;
    return 0;
}

/* Most children come soon after their parent: a range is kept in `recent`, where looking it
   up is one load, and moved to the table only if it is still open when its slot is needed. */
static int add_open(Pass *self, int32_t row, int span, int64_t end, int64_t now) {
    Open *slot = &self->recent[row & (RECENT - 1)];
    if (slot->row >= 0 && slot->end > now && keep_open(self, *slot, now) < 0) return -1;
    *slot = (Open){row, span, end, INT64_MIN};
    return 0;
}

static void *grown(void *data, Py_ssize_t capacity, size_t size) {
    return PyMem_RawRealloc(data, (size_t)capacity * size);
}

/* A segment starts at row ``at`` with id ``id``: NOT_RECORDED past MAX_SEGMENTS. When it starts
   a block too (``block``), the ranges still open belong to the block before (a closed parent is
   looked up in its own block). */
static int new_segment(Pass *self, int64_t id, Py_ssize_t at, int block) {
    if (self->segments == MAX_SEGMENTS) return NOT_RECORDED;
    if (self->segments == self->seg_capacity) {
        Py_ssize_t capacity = self->seg_capacity ? self->seg_capacity * 2 : 16;
        int64_t *first = grown(self->seg_first, capacity, sizeof(int64_t));
        if (first) self->seg_first = first;
        int64_t *last = grown(self->seg_last, capacity, sizeof(int64_t));
        if (last) self->seg_last = last;
        Py_ssize_t *base = grown(self->seg_base, capacity, sizeof(Py_ssize_t));
        if (base) self->seg_base = base;
        int32_t *sorted = grown(self->seg_sorted, capacity, sizeof(int32_t));
        if (sorted) self->seg_sorted = sorted;
        if (!first || !last || !base || !sorted) return NO_MEMORY;
        self->seg_capacity = capacity;
    }
    Py_ssize_t s = self->segments++;
    self->seg_first[s] = self->seg_last[s] = id;
    self->seg_base[s] = at;
    Py_ssize_t lo = 0, hi = s; /* where it goes among the others, by first id */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (self->seg_first[self->seg_sorted[mid]] < id) lo = mid + 1;
        else hi = mid;
    }
    self->moved += s - lo;
    if (self->moved > MOVES_PER_ROW * (int64_t)at + MOVES_BASE) {
        self->segments--;
        return NOT_RECORDED;
    }
    memmove(&self->seg_sorted[lo + 1], &self->seg_sorted[lo], (size_t)(s - lo) * sizeof(int32_t));
    self->seg_sorted[lo] = (int32_t)s;
    if (!block) return OK;
    self->block_base = at;
    if (self->open_used) {
        for (Py_ssize_t slot = 0; slot < self->open_capacity; slot++) self->open[slot].row = -1;
        self->open_used = 0;
    }
    return OK;
}

/* The position of the row with id ``id`` in segment ``s``, or -1. */
static inline Py_ssize_t in_segment(const Pass *self, Py_ssize_t s, int64_t id) {
    uint64_t offset = (uint64_t)id - (uint64_t)self->seg_first[s];
    if (offset <= (uint64_t)self->seg_last[s] - (uint64_t)self->seg_first[s])
        return self->seg_base[s] + (Py_ssize_t)offset;
    return -1;
}

/* The position of the row with id ``id`` among the rows so far, or -1: its parent is most
   often in the current segment, the one before (the other id run of a thread taking turns) or
   where the last search found one (an outer range). */
static Py_ssize_t find_position(Pass *self, int64_t id) {
    Py_ssize_t cur = self->segments - 1, found = in_segment(self, cur, id);
    if (found >= 0) return found;
    if (cur > 0 && (found = in_segment(self, cur - 1, id)) >= 0) return found;
    if (self->seg_hit < cur && (found = in_segment(self, self->seg_hit, id)) >= 0) return found;
    Py_ssize_t lo = 0, hi = self->segments; /* the last segment whose first id is <= id */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (self->seg_first[self->seg_sorted[mid]] <= id) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    Py_ssize_t s = self->seg_sorted[lo - 1];
    if (id > self->seg_last[s]) return -1;
    self->seg_hit = s;
    return self->seg_base[s] + (Py_ssize_t)(id - self->seg_first[s]);
}

/* The pass over one piece; the GIL is released. */
static int run(Pass *self, Py_ssize_t rows, const int64_t *ids, const int64_t *parent_ids,
               const uint8_t *parent_valid, const int64_t *start, const int64_t *end,
               const uint8_t *end_valid, const uint8_t *closed, const uint8_t *span,
               const int32_t *codes) {
    int ends_before = 0;
    int64_t bad_end = 0;
    /* The arrays are grown before the pass, never during it: held in locals, which the stores
       into them cannot be taken to change. */
    Row *const state = self->rows;
    int64_t *const count = self->count, *const duration = self->duration;
    int64_t *const self_time = self->self_time, *const total = self->total;
    int64_t *const minimum = self->minimum, *const maximum = self->maximum;
    int64_t *const own_out = self->own_out, *const took_out = self->took_out;
    /* So are the scalars that every row updates (written back on the way out): through
       `self` each would be stored and loaded again at every store into a group's array. */
    int64_t prev_id = self->prev_id, last_start = self->last_start;
    int64_t low = self->low, high = self->high, self_total = self->self_total;
    int64_t extent_first = self->extent_first, extent_last = self->extent_last;
    int status = OK;
    for (Py_ssize_t k = 0; k < rows; k++) {
        Py_ssize_t i = self->at + k;
        int64_t id = ids[k], begin = start[k];
        int block = self->segments == 0 || begin < last_start;
        if (block || (uint64_t)id != (uint64_t)prev_id + 1) {
            status = new_segment(self, id, i, block);
            if (status != OK) goto out;
        } else {
            self->seg_last[self->segments - 1] = id;
        }
        prev_id = id;
        last_start = begin;
        if (id < low) low = id;
        if (id > high) high = id;
        int valid_end = end_valid == NULL || end_valid[k];
        if (valid_end && end[k] < begin && !ends_before) {
            ends_before = 1; /* told once the piece is in, as the numpy path tells it */
            bad_end = id;
        }
        int32_t parent = -1;
        if (parent_valid == NULL || parent_valid[k]) {
            Py_ssize_t found = find_position(self, parent_ids[k]);
            if (found >= i) { /* itself, or a later row */
                status = NOT_RECORDED;
                goto out;
            }
            if (found < 0) {                      /* a later segment's, another part's, or none */
                if (self->unresolved_n == self->unresolved_capacity) {
                    Py_ssize_t capacity = self->unresolved_capacity ? self->unresolved_capacity * 2 : 64;
                    int64_t *more = grown(self->unresolved, capacity, sizeof(int64_t));
                    if (more == NULL) {
                        status = NO_MEMORY;
                        goto out;
                    }
                    self->unresolved = more;
                    self->unresolved_capacity = capacity;
                }
                self->unresolved[self->unresolved_n++] = parent_ids[k];
            } else if (found < self->block_base) { /* another block's */
                if (code_of(&state[found]) >= 0) {
                    status = NOT_RECORDED;
                    goto out;
                }
            } else {
                parent = (int32_t)found;
            }
        }
        Row *row = &state[i];
        if (!(closed[k] && valid_end)) {
            row->tag = NO_GROUP;
            continue;
        }
        int32_t g = codes[k];
        int is_span = span[k] != 0;
        int64_t stop = end[k], took = stop - begin;
        count[g] += 1;
        duration[g] += took;
        self_time[g] += took;
        if (took < minimum[g]) minimum[g] = took;
        if (took > maximum[g]) maximum[g] = took;
        if (!is_span) self_total += took;
        if (begin < extent_first) extent_first = begin;
        if (stop > extent_last) extent_last = stop;
        if (own_out) {
            own_out[i] += took;
            took_out[i] = took;
        }
        int nested = 0;
        uint32_t above = 0;
        const Row *up = parent >= 0 ? &state[parent] : NULL;
        int32_t up_code = up != NULL ? code_of(up) : -1;
        if (up_code >= 0) {
            Open *open = find_open(self, parent);
            if (open != NULL) {
                /* The part of this child past its siblings before it, inside the parent. */
                int64_t high = stop < open->end ? stop : open->end;
                if (high < begin) high = begin;
                int64_t covered = open->reach;
                int64_t low = begin > covered ? begin : covered;
                if (high > low) {
                    int64_t added = high - low;
                    self_time[up_code] -= added;
                    if (!open->span) self_total -= added;
                    if (own_out) own_out[parent] -= added;
                }
                if (high > covered) open->reach = high;
            }
            row->link = parent;
            above = above_of(up) | bit_of(up_code);
            if (above & bit_of(g)) {
                for (int32_t at = parent; at >= 0; at = state[at].link) {
                    /* g is below NO_GROUP: the tag's code compared as it is (code_of's test
                       of NO_GROUP here cost 3% of the pass) */
                    if ((state[at].tag & NO_GROUP) == (uint32_t)g) {
                        nested = 1;
                        break;
                    }
                }
            }
        } else {
            row->link = -1;
        }
        row->tag = (uint32_t)g | (above << CODE_BITS);
        if (!nested) total[g] += took;
        if (stop > begin && add_open(self, (int32_t)i, is_span, stop, begin) < 0) {
            status = NO_MEMORY;
            goto out;
        }
    }
    if (ends_before) {
        self->bad = bad_end;
        status = ENDS_BEFORE_START;
    }
out:
    self->prev_id = prev_id;
    self->last_start = last_start;
    self->low = low;
    self->high = high;
    self->self_total = self_total;
    self->extent_first = extent_first;
    self->extent_last = extent_last;
    return status;
}

static PyObject *Pass_add(Pass *self, PyObject *args) {
    PyObject *objs[9];
    Py_ssize_t groups;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &groups))
        return NULL;
    static const Py_ssize_t sizes[9] = {8, 8, 1, 8, 8, 1, 1, 1, 4};
    static const int optional[9] = {0, 0, 1, 0, 0, 1, 0, 0, 0};
    static const char *what[9] = {"ids", "parent_ids", "parent_valid", "start", "end",
                                  "end_valid", "closed", "span", "codes"};
    Held held[9];
    int status = -1, got = 0;
    Py_ssize_t rows = 0;
    if (PyObject_GetBuffer(objs[0], &held[0].view, PyBUF_C_CONTIGUOUS) == 0) {
        rows = held[0].view.len / 8;
        PyBuffer_Release(&held[0].view);
    } else {
        return NULL;
    }
    for (; got < 9; got++)
        if (hold(objs[got], sizes[got], rows, optional[got], what[got], &held[got]) < 0) {
            got++;
            goto done;
        }
    if (rows > self->n - self->at) {
        PyErr_SetString(PyExc_ValueError, "more rows than the pass was made for");
        goto done;
    }
    if (groups > MAX_GROUPS) { /* the row state has no room for their codes */
        status = NOT_RECORDED;
        goto done;
    }
    if (groups < 0 || grow(self, groups) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "groups must be >= 0");
        goto done;
    }
    const int32_t *codes = held[8].view.buf;
    for (Py_ssize_t k = 0; k < rows; k++)
        if (codes[k] < 0 || codes[k] >= groups) {
            PyErr_Format(PyExc_ValueError, "a code outside 0..%zd", groups - 1);
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS
    status = run(self, rows, held[0].view.buf, held[1].view.buf, held[2].view.buf,
                 held[3].view.buf, held[4].view.buf, held[5].view.buf, held[6].view.buf,
                 held[7].view.buf, codes);
    Py_END_ALLOW_THREADS
    if (status == NO_MEMORY) {
        PyErr_NoMemory();
        status = -1;
    }
    if (status == OK) self->at += rows;
done:
    for (int a = 0; a < got; a++)
        if (held[a].held) PyBuffer_Release(&held[a].view);
    if (status < 0) return NULL;
    return PyLong_FromLong(status);
}

/* Once every row is in: ids repeat (segments overlap) or a parent met later -> NOT_RECORDED;
   with whole files a parent that is no row's id -> DANGLING_PARENT (``bad``). */
static int finish(Pass *self) {
    for (Py_ssize_t s = 1; s < self->segments; s++)
        if (self->seg_first[self->seg_sorted[s]] <= self->seg_last[self->seg_sorted[s - 1]])
            return NOT_RECORDED;
    for (Py_ssize_t u = 0; u < self->unresolved_n; u++) {
        if (find_position(self, self->unresolved[u]) >= 0) return NOT_RECORDED;
        if (self->whole) {
            self->bad = self->unresolved[u];
            return DANGLING_PARENT;
        }
    }
    return OK;
}

static PyObject *Pass_finish(Pass *self, PyObject *Py_UNUSED(ignored)) {
    if (self->at != self->n) {
        PyErr_Format(PyExc_ValueError, "%zd of %zd rows were added", self->at, self->n);
        return NULL;
    }
    return PyLong_FromLong(self->segments ? finish(self) : OK);
}

static PyObject *as_bytes(const void *data, Py_ssize_t size) {
    return PyBytes_FromStringAndSize(data ? (const char *)data : "", data ? size : 0);
}

static PyObject *Pass_result(Pass *self, PyObject *Py_UNUSED(ignored)) {
    Py_ssize_t size = self->capacity * (Py_ssize_t)sizeof(int64_t);
    return Py_BuildValue("(NNNNNNLLL)", as_bytes(self->count, size),
                         as_bytes(self->duration, size), as_bytes(self->self_time, size),
                         as_bytes(self->total, size), as_bytes(self->minimum, size),
                         as_bytes(self->maximum, size), (long long)self->self_total,
                         (long long)self->extent_first, (long long)self->extent_last);
}

/* ``obj`` as a writable C-contiguous buffer of int64 (``rows`` of them, or any number for -1). */
static int hold_int64_out(PyObject *obj, Py_ssize_t rows, const char *what, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@') format++;
    if (view->itemsize != 8 || (strcmp(format, "q") != 0 && strcmp(format, "l") != 0) ||
        (rows >= 0 && view->len != rows * 8)) {
        PyErr_Format(PyExc_ValueError, "%s: a writable int64 array%s wanted", what,
                     rows >= 0 ? " of one item per closed range" : "");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The closed ranges' durations and self times into ``durations`` and ``self_times``, grouped:
   group 0's in row order, then group 1's, ... (each group's share is its count). */
static PyObject *Pass_grouped(Pass *self, PyObject *args) {
    PyObject *objs[2];
    if (!PyArg_ParseTuple(args, "OO", &objs[0], &objs[1])) return NULL;
    if (self->own_out == NULL) {
        PyErr_SetString(PyExc_ValueError, "the pass was made without keep_rows");
        return NULL;
    }
    if (self->at != self->n) {
        PyErr_Format(PyExc_ValueError, "%zd of %zd rows were added", self->at, self->n);
        return NULL;
    }
    Py_ssize_t closed = 0, groups = self->capacity;
    for (Py_ssize_t g = 0; g < groups; g++) closed += (Py_ssize_t)self->count[g];
    Py_buffer out[2];
    if (hold_int64_out(objs[0], closed, "durations", &out[0]) < 0) return NULL;
    if (hold_int64_out(objs[1], closed, "self_times", &out[1]) < 0) {
        PyBuffer_Release(&out[0]);
        return NULL;
    }
    Py_ssize_t *next = PyMem_RawMalloc((size_t)(groups ? groups : 1) * sizeof(Py_ssize_t));
    if (next == NULL) {
        PyBuffer_Release(&out[0]);
        PyBuffer_Release(&out[1]);
        return PyErr_NoMemory();
    }
    int64_t *took = out[0].buf, *own = out[1].buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        next[g] = at;
        at += (Py_ssize_t)self->count[g];
    }
    for (Py_ssize_t i = 0; i < self->n; i++) {
        int32_t g = code_of(&self->rows[i]);
        if (g < 0) continue;
        Py_ssize_t to = next[g]++;
        took[to] = self->took_out[i];
        own[to] = self->own_out[i];
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(next);
    PyBuffer_Release(&out[0]);
    PyBuffer_Release(&out[1]);
    Py_RETURN_NONE;
}

/* Order statistics in place: afterwards ``v[k]`` holds the value of rank ``k`` among
   ``v[lo..hi]``, the values before it are no greater and those after it no smaller (Hoare's
   partition around a median of three, which keeps runs of equal values balanced). */
static int compare_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void select_rank(int64_t *v, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t k) {
    for (int rounds = 0; hi > lo; rounds++) {
        if (k == lo || k == hi) { /* the least or the greatest: one scan */
            Py_ssize_t best = lo;
            for (Py_ssize_t i = lo + 1; i <= hi; i++)
                if (k == lo ? v[i] < v[best] : v[i] > v[best]) best = i;
            int64_t t = v[k];
            v[k] = v[best];
            v[best] = t;
            return;
        }
        if (hi - lo < 16 || rounds > 64) { /* small, or unlucky pivots: sort what is left */
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof(int64_t), compare_int64);
            return;
        }
        Py_ssize_t mid = lo + (hi - lo) / 2;
        int64_t a = v[lo], b = v[mid], c = v[hi], t;
        if (a > b) { t = a; a = b; b = t; }
        if (b > c) { t = b; b = c; c = t; }
        if (a > b) { t = a; a = b; b = t; }
        v[lo] = a;
        v[mid] = b;
        v[hi] = c;
        int64_t pivot = b;
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return; /* between j and i every value equals the pivot */
    }
}

/* Every rank of ``ranks[0..count)`` (ascending, within lo..hi) to its place: the middle one
   first, then those below it among the values below it, and those above among those above. */
static void select_ranks(int64_t *v, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t *ranks,
                         int count) {
    while (count > 0) {
        int middle = count / 2;
        Py_ssize_t k = ranks[middle];
        select_rank(v, lo, hi, k);
        select_ranks(v, lo, k - 1, ranks, middle);
        ranks += middle + 1;
        count -= middle + 1;
        lo = k + 1;
    }
}

#define MAX_RANKS 64

static int add_rank(Py_ssize_t *ranks, int *count, Py_ssize_t rank) {
    for (int r = 0; r < *count; r++)
        if (ranks[r] == rank) return 0;
    if (*count == MAX_RANKS) return -1;
    ranks[(*count)++] = rank;
    return 0;
}

static int compare_rank(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

/* A non-negative value's bucket: the value itself below 512, else its highest 9 bits with
   its bit length; buckets follow the values' order and each spans under 0.4% of its values.
   Without branches: values small and large come mixed. */
#define BUCKETS (256 * 56)
static inline Py_ssize_t bucket_of(int64_t x) {
    int length = 64 - __builtin_clzll((unsigned long long)x | 1); /* 1 .. 63 */
    int shift = length > 9 ? length - 9 : 0;
    return ((Py_ssize_t)shift << 8) + (Py_ssize_t)(x >> shift);
}

/* The ranks (ascending, count of them) to their places in v[0..n) and the sum of the values
   whose ranks lie from ranks[sum_from] to ranks[sum_to] (when sum_from >= 0). Large arrays of
   non-negative values (durations) go through a histogram of their buckets: only the values in
   the buckets that hold a wanted rank are gathered and selected among, the rest summed where
   the sum wants them. Returns -1 when out of memory. */
static int place_ranks(int64_t *v, Py_ssize_t n, Py_ssize_t *ranks, int count, int sum_from,
                       int sum_to, int64_t *values_out, uint64_t *sum_out) {
    uint32_t *hist = NULL;
    int64_t least = 0;
    if (n >= 2048) {
        /* two histograms, even and odd values, so runs of one bucket do not wait on each other */
        hist = PyMem_RawCalloc(2 * BUCKETS, sizeof(uint32_t));
        if (hist == NULL) return -1;
        Py_ssize_t i = 0;
        for (; i + 1 < n; i += 2) {
            int64_t x = v[i], y = v[i + 1];
            least = x < least ? x : least;
            least = y < least ? y : least;
            hist[bucket_of(x & ~(x >> 63))]++; /* a negative value counts as 0 here */
            hist[BUCKETS + bucket_of(y & ~(y >> 63))]++;
        }
        if (i < n) {
            least = v[i] < least ? v[i] : least;
            hist[bucket_of(v[i] & ~(v[i] >> 63))]++;
        }
        for (Py_ssize_t b = 0; b < BUCKETS; b++) hist[b] += hist[BUCKETS + b];
    }
    if (n < 2048 || least < 0) { /* small, or negative values: select in place */
        PyMem_RawFree(hist);
        select_ranks(v, 0, n - 1, ranks, count);
        uint64_t sum = 0;
        if (sum_from >= 0)
            for (Py_ssize_t k = ranks[sum_from]; k <= ranks[sum_to]; k++) sum += (uint64_t)v[k];
        for (int r = 0; r < count; r++) values_out[r] = v[ranks[r]];
        *sum_out = sum;
        return 0;
    }
    uint8_t *wanted = PyMem_RawCalloc(BUCKETS, 1);
    if (wanted == NULL) {
        PyMem_RawFree(hist);
        return -1;
    }
    /* the bucket of each rank, and how many values lie in unwanted buckets below it */
    Py_ssize_t bucket[MAX_RANKS], below[MAX_RANKS];
    Py_ssize_t seen = 0, b = 0;
    for (int r = 0; r < count; r++) {
        while (seen + (Py_ssize_t)hist[b] <= ranks[r]) seen += hist[b++];
        bucket[r] = b;
        wanted[b] = 1;
    }
    Py_ssize_t gathered = 0, skipped = 0;
    for (Py_ssize_t r = 0, under = 0; r < count; r++) {
        for (; under < bucket[r]; under++)
            if (!wanted[under]) skipped += hist[under];
        if (r == 0 || bucket[r] != bucket[r - 1]) gathered += hist[bucket[r]];
        below[r] = skipped;
    }
    int64_t *kept = PyMem_RawMalloc((size_t)(gathered + 1) * sizeof(int64_t));
    if (kept == NULL) {
        PyMem_RawFree(hist);
        PyMem_RawFree(wanted);
        return -1;
    }
    /* the values strictly between the trimmed mean's two buckets are summed as they pass */
    Py_ssize_t low = sum_from >= 0 ? bucket[sum_from] : BUCKETS;
    Py_ssize_t high = sum_from >= 0 ? bucket[sum_to] : 0;
    uint64_t sum = 0;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* without branches: the buckets come in any order */
        Py_ssize_t here = bucket_of(v[i]);
        uint64_t keep = wanted[here], between = (uint64_t)((here > low) & (here < high));
        kept[at] = v[i];
        at += (Py_ssize_t)keep;
        sum += (uint64_t)v[i] & (0 - (between & (keep ^ 1)));
    }
    Py_ssize_t local[MAX_RANKS];
    int distinct = 0;
    for (int r = 0; r < count; r++) {
        local[r] = ranks[r] - below[r];
        if (distinct == 0 || local[distinct - 1] != local[r]) local[distinct++] = local[r];
    }
    select_ranks(kept, 0, gathered - 1, local, distinct);
    if (sum_from >= 0)
        for (Py_ssize_t k = ranks[sum_from] - below[sum_from]; k <= ranks[sum_to] - below[sum_to];
             k++)
            sum += (uint64_t)kept[k];
    for (int r = 0; r < count; r++) values_out[r] = kept[ranks[r] - below[r]];
    *sum_out = sum;
    PyMem_RawFree(kept);
    PyMem_RawFree(hist);
    PyMem_RawFree(wanted);
    return 0;
}

/* order_stats(values, at, between) -> (quantiles..., trimmed mean): see the method table. */
static PyObject *order_stats(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *values, *at, *between;
    if (!PyArg_ParseTuple(args, "OOO", &values, &at, &between)) return NULL;
    PyObject *levels = PySequence_Fast(at, "at must be a sequence of floats");
    if (levels == NULL) return NULL;
    Py_ssize_t wanted = PySequence_Fast_GET_SIZE(levels);
    double q[MAX_RANKS / 2 - 1], trim[2] = {-1.0, -1.0};
    int ok = wanted < MAX_RANKS / 2 - 1;
    for (Py_ssize_t w = 0; ok && w < wanted; w++) {
        q[w] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(levels, w));
        ok = !(q[w] == -1.0 && PyErr_Occurred()) && q[w] >= 0.0 && q[w] <= 1.0;
    }
    Py_DECREF(levels);
    if (ok && between != Py_None)
        ok = PyArg_ParseTuple(between, "dd", &trim[0], &trim[1]) && trim[0] >= 0.0 &&
             trim[0] <= trim[1] && trim[1] <= 1.0;
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "levels between 0 and 1 wanted (at most 30)");
        return NULL;
    }
    Py_buffer view;
    if (hold_int64_out(values, -1, "values", &view) < 0) return NULL;
    Py_ssize_t n = view.len / 8;
    if (n == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "no values");
        return NULL;
    }
    Py_ssize_t ranks[MAX_RANKS], low[MAX_RANKS / 2], trim_low = 0, trim_high = 0;
    double weight[MAX_RANKS / 2];
    int count = 0;
    for (Py_ssize_t w = 0; w < wanted; w++) { /* as numpy's linear interpolation */
        double position = (double)(n - 1) * q[w];
        low[w] = (Py_ssize_t)floor(position);
        weight[w] = position - (double)low[w];
        add_rank(ranks, &count, low[w]);
        add_rank(ranks, &count, low[w] + 1 < n ? low[w] + 1 : n - 1);
    }
    if (between != Py_None) {
        trim_low = (Py_ssize_t)floor((double)(n - 1) * trim[0]);
        trim_high = (Py_ssize_t)ceil((double)(n - 1) * trim[1]);
        if (trim_high < trim_low) trim_high = trim_low;
        add_rank(ranks, &count, trim_low);
        add_rank(ranks, &count, trim_high);
    }
    qsort(ranks, (size_t)count, sizeof(Py_ssize_t), compare_rank);
    int sum_from = -1, sum_to = -1;
    for (int r = 0; r < count && between != Py_None; r++) {
        if (ranks[r] == trim_low) sum_from = r;
        if (ranks[r] == trim_high) sum_to = r;
    }
    int64_t at_rank[MAX_RANKS];
    uint64_t sum = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = place_ranks(view.buf, n, ranks, count, sum_from, sum_to, at_rank, &sum);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status < 0) return PyErr_NoMemory();
    double mean = NAN;
    if (between != Py_None) mean = (double)(int64_t)sum / (double)(trim_high - trim_low + 1);
    PyObject *found = PyTuple_New(wanted + 1);
    for (Py_ssize_t w = 0; found != NULL && w < wanted; w++) {
        Py_ssize_t high = low[w] + 1 < n ? low[w] + 1 : n - 1;
        int64_t below = 0, above = 0;
        for (int r = 0; r < count; r++) {
            if (ranks[r] == low[w]) below = at_rank[r];
            if (ranks[r] == high) above = at_rank[r];
        }
        double value = (double)below * (1.0 - weight[w]) + (double)above * weight[w];
        PyTuple_SET_ITEM(found, w, PyFloat_FromDouble(value));
    }
    if (found != NULL) PyTuple_SET_ITEM(found, wanted, PyFloat_FromDouble(mean));
    return found;
}

static PyObject *Pass_get_bad(Pass *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->bad);
}

static PyObject *Pass_get_low(Pass *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->low);
}

static PyObject *Pass_get_high(Pass *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->high);
}

static PyMethodDef Pass_methods[] = {
    {"add", (PyCFunction)Pass_add, METH_VARARGS,
     "add(ids, parent_ids, parent_valid, start, end, end_valid, closed, span, codes, groups)"
     " -> status: the next rows (numpy arrays; the validity arrays may be None for no nulls);"
     " NOT_RECORDED when groups is above MAX_GROUPS."},
    {"finish", (PyCFunction)Pass_finish, METH_NOARGS,
     "finish() -> status, once every row is in: NOT_RECORDED for ids that repeat or a parent "
     "met after its child, DANGLING_PARENT (whole files) for a parent that is no row's id."},
    {"result", (PyCFunction)Pass_result, METH_NOARGS,
     "(count, duration, self, total, min, max) as int64 bytes per group, then the self-time "
     "total without profiler spans, the first start and the last end of the closed ranges."},
    {"grouped", (PyCFunction)Pass_grouped, METH_VARARGS,
     "grouped(durations, self_times): the closed ranges' durations and self times written into "
     "the two int64 arrays (one item per closed range), group by group in code order (each "
     "group's count of them), in row order within a group; with keep_rows, once all rows are in."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Pass_getset[] = {
    {"bad", (getter)Pass_get_bad, NULL, "the id or parent_id the last error status names", NULL},
    {"low", (getter)Pass_get_low, NULL, "the lowest id (INT64_MAX without rows)", NULL},
    {"high", (getter)Pass_get_high, NULL, "the highest id (INT64_MIN without rows)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PassType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._csummary.Pass",
    .tp_basicsize = sizeof(Pass),
    .tp_dealloc = (destructor)Pass_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pass(n, whole, keep_rows): one process's rows summarised in one pass.",
    .tp_methods = Pass_methods,
    .tp_getset = Pass_getset,
    .tp_init = (initproc)Pass_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"order_stats", (PyCFunction)order_stats, METH_VARARGS,
     "order_stats(values, at, between) -> (quantile at each level of ``at``, trimmed mean): "
     "``values`` a non-empty writable int64 array, reordered in place; the quantiles "
     "interpolated linearly as numpy's default; the trimmed mean (NaN when ``between`` is None) "
     "is the integer sum of the values whose ranks lie from floor((n - 1) * low) to "
     "max(ceil((n - 1) * high), that), divided by their number."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_csummary",
    "The out-of-core summary's one pass over a process's rows as recorded, and the order "
    "statistics of its calls.", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__csummary(void) {
    if (PyType_Ready(&PassType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PassType);
    if (PyModule_AddObject(m, "Pass", (PyObject *)&PassType) < 0 ||
        PyModule_AddIntConstant(m, "OK", OK) < 0 ||
        PyModule_AddIntConstant(m, "NOT_RECORDED", NOT_RECORDED) < 0 ||
        PyModule_AddIntConstant(m, "ENDS_BEFORE_START", ENDS_BEFORE_START) < 0 ||
        PyModule_AddIntConstant(m, "DANGLING_PARENT", DANGLING_PARENT) < 0 ||
        PyModule_AddIntConstant(m, "MAX_GROUPS", MAX_GROUPS) < 0) {
        Py_DECREF(&PassType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
