/* recfn.native._ctrace: the C profile hook behind trace_calls (compiled builds only).
 *
 * Per call the hook reads the clock once, looks the name id of the code object (with
 * trace_c_calls, of the C function or bound C method) up in a cache (a miss asks the Python
 * Tracer once), bounds the depth, takes an event from the recorder's shared counters and appends
 * a 32-byte row to its thread's buffer: no Python code runs per call.
 * recfn.capture._tracer merges each thread's rows into the recorder's buffer when tracing stops.
 *
 * On 3.10-3.11 the hook is installed with PyEval_SetProfile on the tracing thread and, through
 * threading.setprofile, on threads started while tracing. On 3.12+ the CTracer's on_* methods
 * are sys.monitoring callbacks (process-wide; a thread's state is found by its ident), the
 * same events the Python tracer's callbacks take, without a frame object per call. The recorder's counters (events,
 * dropped, stopped, epoch) live in a vec[int64] (its "gate") that the hook reaches through the
 * buffer protocol. The epoch changes whenever a recorded range starts or ends; the hook then
 * (or when the running task's context frame changed) asks the Python Tracer for the engine's
 * innermost open range, the traced call's parent candidate.
 *
 * The clock. Rows are in CLOCK_MONOTONIC ns (time.perf_counter_ns's clock, the recorded ranges'),
 * plus the recorder's clock offset. On x86-64, where the kernel's own clocksource is the TSC,
 * the hook reads the TSC (one instruction) instead of calling clock_gettime: each thread keeps
 * anchors, (tsc, monotonic ns) read back to back, and take() converts its rows by interpolating
 * linearly between the two anchors around each value. A thread takes an anchor at its first
 * clock read, at the first read after any recorded range started or ended (that read is the
 * anchor: exact, so a traced call never converts to before a range boundary it follows), once
 * ANCHOR_TICKS have passed since the last one, and when tracing stops. So every value lies
 * between exact clock reads at most ANCHOR_TICKS (50-260 us at TSC rates of 1-5 GHz) apart;
 * its error is at most the change of the clock's rate within that interval times its length
 * (even a whole 500 ppm NTP slew over 100 us: 50 ns; in practice under 1 ns) plus half of one
 * clock_gettime (~10 ns). The conversion is monotone, so order and nesting are kept.
 * Elsewhere the hook reads clock_gettime(CLOCK_MONOTONIC) itself.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "recfn_constants.h" /* generated from recfn/native/constants.py */


typedef struct {
    int64_t start, end; /* end 0: still open when tracing stopped */
    int64_t user;       /* handle of the engine's innermost open range at the call, 0: none */
    int32_t nid;        /* interned name id */
    int32_t parent;     /* row of the enclosing traced call on this thread, -1: none */
} Row;

typedef struct {
    int64_t tsc, ns; /* a TSC value and the monotonic ns read at that moment */
} Anchor;

typedef struct {
    PyObject *key; /* the frame or C function of an open traced call (a strong reference) */
    Py_ssize_t row;
    int64_t hidden; /* library calls hidden (counted, not recorded) while it was the innermost */
} Open;

typedef struct {
    PyObject *key; /* 3.10-3.11: the frame; 3.12+: the code object (a strong reference) */
    int kind;      /* CODE_USER, CODE_LIBRARY or CODE_RECFN, as the calls it makes see it */
} Caller;

typedef struct {
    PyObject *key;      /* a code object or C function, or the type of a bound C method's self
                           (a strong reference); NULL: empty slot */
    const void *method; /* a bound C method's PyMethodDef, NULL for the others */
    int64_t info;       /* code info (name id, kind, package), for C callables the name id */
} Slot;

typedef struct CTracer CTracer;

typedef struct {
    PyObject_HEAD
    CTracer *owner;
    PyObject *info; /* what the Python Tracer keeps for this thread (its recorder buffer) */
    Row *rows;
    Py_ssize_t n, cap;
    Open *stack;
    Py_ssize_t sp, stack_cap;
    PyObject *last_code; /* borrowed: the owner's cache holds it */
    int64_t last_info;
    PyObject *ctx; /* the context frame when `user` was looked up (strong), NULL: none yet */
    int64_t epoch, user;
    int tsc;              /* rows hold TSC values until take() converts them */
    Anchor *anchors;
    Py_ssize_t n_anchors, anchors_cap;
    int64_t anchor_due, anchor_epoch; /* the next read is an anchor from this TSC value on, or
                                         once the recorder's epoch is no longer this */
    int64_t narrowest; /* the narrowest anchor read so far, in TSC ticks (0: none yet) */
    /* Following user code (trace_user_code): every Python call open on the thread since
     * tracing started, with how its callees see it. */
    Caller *callers;
    Py_ssize_t n_callers, callers_cap;
    /* What the tracer did, for the recording overhead and the hidden counts. */
    int64_t py_events, c_events, recorded; /* callbacks on Python / C calls; rows written */
    int64_t *hidden_rows;                   /* (row, library calls hidden under it) pairs */
    Py_ssize_t n_hidden, hidden_cap;        /* pairs in use, pairs allocated */
    int64_t *package_hidden;                /* library calls hidden, by package number */
    Py_ssize_t n_packages;
    /* 3.10-3.11: the time the thread runs Python code (slower under a profile function: 3.11
     * turns its specialised instructions off), told from the time in C functions by the call
     * events. `runs` says what each open call runs (1: Python, 0: C); Python code has run since
     * `python_since` when the innermost does; clock values are the TSC's when ts->tsc, converted
     * by the two clock pairs read when the thread was first seen and when counts are read. */
    uint8_t *runs;
    Py_ssize_t n_runs, runs_cap;
    int64_t python_ticks, python_since;
    Anchor first_clocks;
} ThreadState;

struct CTracer {
    PyObject_HEAD
    PyObject *tracer;      /* the Python Tracer: code_name, c_name, innermost, thread_info, report */
    PyObject *current_var; /* the engine's ContextVar of the running task's ranges */
    PyObject *threads;     /* list of ThreadState */
    uint64_t serial;       /* this tracer's number: tells the thread-local state of its threads */
    PyObject *disable;     /* sys.monitoring.DISABLE, or None */
    Py_buffer gate_view;
    int64_t *gate;
    int64_t max_events, max_depth, clock_offset;
    int c_calls, stopped, tsc;
    int follow; /* trace_user_code: user code and its library entry points; the rest counted */
    Slot *slots; /* open addressing by (key, method); n_slots is a power of two */
    Py_ssize_t n_slots, used;
};

/* The calling thread's state for tracer `serial`: a thread-local (initial-exec: one load) that
 * dies with its thread, where thread idents are reused. */
static __thread ThreadState *tl_state __attribute__((tls_model("initial-exec")));
static __thread uint64_t tl_serial __attribute__((tls_model("initial-exec")));
static uint64_t next_serial;

static PyTypeObject ThreadStateType;
static PyTypeObject CTracerType;
static PyObject *str_code_name, *str_c_name, *str_innermost, *str_thread_info, *str_report;

/* -- the clock ------------------------------------------------------------------------------ */

#define ANCHOR_TICKS ((int64_t)1 << 18) /* the most TSC ticks between two anchors */

static int kernel_uses_tsc; /* x86-64 and the kernel's clocksource is the TSC (read at import) */

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* time.perf_counter_ns's clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#if defined(__x86_64__)
static inline int64_t read_tsc(void) { return (int64_t)__rdtsc(); }

/* The TSC, read after every earlier instruction and before any later one starts. */
static inline int64_t read_tsc_ordered(void) {
    _mm_lfence();
    int64_t tsc = (int64_t)__rdtsc();
    _mm_lfence();
    return tsc;
}

static int clocksource_is_tsc(void) {
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == NULL) return 0;
    char name[32] = {0};
    int tsc = fgets(name, sizeof name, f) != NULL && strcmp(name, "tsc\n") == 0;
    fclose(f);
    return tsc;
}
#else
static inline int64_t read_tsc(void) { return 0; }
static inline int64_t read_tsc_ordered(void) { return 0; }
static int clocksource_is_tsc(void) { return 0; }
#endif

/* Read an anchor: the TSC on both sides of a clock_gettime, their mean standing for the moment
 * of the clock read, exact to half their distance. A thread interrupted between the reads would
 * skew every value interpolated near the anchor (by half the interruption: enough to put a
 * traced call's end after a range it returned inside), so an anchor much wider than the
 * thread's narrowest is read again, up to ANCHOR_TRIES times, and the narrowest kept. Returns
 * its TSC value, which converts to its ns exactly. An anchor not after the thread's last one
 * (a core whose TSC is a few ticks behind) is not kept: the last one's value is returned
 * instead. */
#define ANCHOR_TRIES 4
static int64_t anchor(ThreadState *ts) {
    int64_t tsc = 0, ns = 0, width = INT64_MAX;
    for (int i = 0; i < ANCHOR_TRIES; i++) {
        int64_t before = read_tsc_ordered(), read = now_ns(), after = read_tsc_ordered();
        if (after - before < width) {
            width = after - before;
            tsc = before + width / 2;
            ns = read;
        }
        if (width <= 2 * ts->narrowest + 64) break; /* within the jitter of an uninterrupted read */
    }
    if (ts->narrowest == 0 || width < ts->narrowest) ts->narrowest = width > 0 ? width : 1;
    ts->anchor_due = tsc + ANCHOR_TICKS;
    if (ts->n_anchors > 0) {
        const Anchor *last = &ts->anchors[ts->n_anchors - 1];
        if (tsc <= last->tsc || ns < last->ns) return last->tsc;
    }
    if (ts->n_anchors == ts->anchors_cap) {
        Anchor *grown = PyMem_Realloc(ts->anchors, (size_t)ts->anchors_cap * 2 * sizeof(Anchor));
        if (grown == NULL) return tsc; /* converted between the anchors around it, as any read */
        ts->anchors = grown;
        ts->anchors_cap *= 2;
    }
    ts->anchors[ts->n_anchors++] = (Anchor){tsc, ns};
    return tsc;
}

/* A row's clock value: the TSC (an anchor when one is due), else the monotonic clock's ns. */
static inline int64_t tick(ThreadState *ts) {
    if (!ts->tsc) return now_ns();
    int64_t tsc = read_tsc(), epoch = ts->owner->gate[GATE_EPOCH];
    if (tsc < ts->anchor_due && epoch == ts->anchor_epoch) return tsc;
    ts->anchor_epoch = epoch; /* a recorded range started or ended since the last read */
    return anchor(ts);
}

/* The monotonic ns of TSC value `v` by `n` anchors increasing in both fields: interpolated
 * linearly between the two around it (within them), clamped to the first and last anchors.
 * `*hint` is the last pair used (tried first: values come mostly in order). */
static int64_t to_ns(const Anchor *a, Py_ssize_t n, Py_ssize_t *hint, int64_t v) {
    if (v <= a[0].tsc) return a[0].ns;
    if (v >= a[n - 1].tsc) return a[n - 1].ns;
    Py_ssize_t lo = *hint;
    if (!(a[lo].tsc <= v && v < a[lo + 1].tsc)) {
        Py_ssize_t hi = n - 1; /* a[lo].tsc <= v < a[hi].tsc */
        lo = 0;
        while (hi - lo > 1) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (a[mid].tsc <= v) lo = mid;
            else hi = mid;
        }
        *hint = lo;
    }
    const Anchor *l = &a[lo], *r = &a[lo + 1];
    __int128 dt = (__int128)v - l->tsc, span = (__int128)r->tsc - l->tsc;
    return l->ns + (int64_t)(dt * ((__int128)r->ns - l->ns) / span);
}

/* The thread's rows in ns since the Unix epoch: converted from the TSC by its anchors (with a
 * last one read now), plus the recorder's clock offset; an end of 0 (still open) stays 0. */
static void rows_to_ns(ThreadState *ts) {
    if (ts->tsc && ts->n > 0) anchor(ts);
    Py_ssize_t start_hint = 0, end_hint = 0;
    for (Py_ssize_t i = 0; i < ts->n; i++) {
        Row *row = &ts->rows[i];
        if (ts->tsc) {
            row->start = to_ns(ts->anchors, ts->n_anchors, &start_hint, row->start);
            if (row->end != 0) row->end = to_ns(ts->anchors, ts->n_anchors, &end_hint, row->end);
        }
        row->start += ts->owner->clock_offset;
        if (row->end != 0) row->end += ts->owner->clock_offset;
    }
}

/* A failure inside the hook: the Python Tracer logs it once; the program never sees it. */
static void report(CTracer *t) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb != NULL) PyException_SetTraceback(exc, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    PyObject *r = PyObject_CallMethodOneArg(t->tracer, str_report, exc ? exc : Py_None);
    Py_XDECREF(exc);
    if (r == NULL) PyErr_Clear();
    Py_XDECREF(r);
}

/* An int result of the Python Tracer as int64; sets *ok to 0 on failure. */
static int64_t call_int(CTracer *t, PyObject *name, PyObject *arg1, PyObject *arg2, int *ok) {
    PyObject *args[3] = {t->tracer, arg1, arg2};
    PyObject *r = PyObject_VectorcallMethod(name, args, (arg2 ? 3 : 2) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    int64_t v = 0;
    if (r != NULL) {
        v = PyLong_AsLongLong(r);
        Py_DECREF(r);
    }
    *ok = !(v == -1 && PyErr_Occurred()) && r != NULL;
    if (!*ok) report(t);
    return v;
}

/* -- the name cache: code object or C callable -> name id or NAME_EXCLUDED ----------------------- */

static Slot *slot_for(CTracer *t, PyObject *key, const void *method) {
    size_t mask = (size_t)t->n_slots - 1;
    size_t i = (((uintptr_t)key >> 4) ^ (((uintptr_t)method >> 4) * 0x9E3779B1u)) & mask;
    while (t->slots[i].key != NULL && (t->slots[i].key != key || t->slots[i].method != method))
        i = (i + 1) & mask;
    return &t->slots[i];
}

static int cache_put(CTracer *t, PyObject *key, const void *method, int64_t info) {
    if ((t->used + 1) * 2 > t->n_slots) {
        Py_ssize_t old_n = t->n_slots, n = old_n ? old_n * 2 : 256;
        Slot *old = t->slots, *fresh = PyMem_Calloc((size_t)n, sizeof(Slot));
        if (fresh == NULL) return -1;
        t->slots = fresh;
        t->n_slots = n;
        for (Py_ssize_t i = 0; i < old_n; i++)
            if (old[i].key != NULL) *slot_for(t, old[i].key, old[i].method) = old[i];
        PyMem_Free(old);
    }
    Slot *s = slot_for(t, key, method);
    Py_INCREF(key);
    s->key = key;
    s->method = method;
    s->info = info;
    t->used++;
    return 0;
}

/* A code info's parts (recfn/native/constants.py): the name id (NAME_EXCLUDED when filtered
 * out), whose code it is (CODE_USER, CODE_LIBRARY, CODE_RECFN) and its package's number. */
static inline int32_t info_nid(int64_t info) { return (int32_t)(uint32_t)((uint64_t)info & 0xffffffffu); }
static inline int info_kind(int64_t info) { return (int)((info >> CODE_KIND_SHIFT) & CODE_KIND_MASK); }
static inline int64_t info_package(int64_t info) { return info >> CODE_PACKAGE_SHIFT; }

/* The code info of `code` (the Python Tracer's code_name, cached); NAME_NOT_NOW when it cannot
 * be named now. */
static int64_t code_info(ThreadState *ts, PyObject *code, PyFrameObject *frame) {
    if (code == ts->last_code) return ts->last_info;
    CTracer *t = ts->owner;
    if (t->n_slots) {
        Slot *s = slot_for(t, code, NULL);
        if (s->key != NULL) {
            ts->last_code = code;
            ts->last_info = s->info;
            return s->info;
        }
    }
    int ok;
    int64_t info = call_int(t, str_code_name, code, frame ? (PyObject *)frame : Py_None, &ok);
    if (!ok || info < 0) return NAME_NOT_NOW;
    if (cache_put(t, code, NULL, info) < 0) return NAME_NOT_NOW;
    ts->last_code = code;
    ts->last_info = info;
    return info;
}

/* The name id of `code` (NAME_EXCLUDED when filtered out, NAME_NOT_NOW when it cannot be named now). */
static int32_t code_nid(ThreadState *ts, PyObject *code, PyFrameObject *frame) {
    int64_t info = code_info(ts, code, frame);
    return info < 0 ? NAME_NOT_NOW : info_nid(info);
}

/* The name id of the C callable `fn`, cached as the Python Tracer's c_name caches it: a C
 * function of a module, or a method descriptor (3.12+ calls `x.append(1)` through
 * `list.append`), by identity (the Tracer keeps it alive); a C method bound to an object or a
 * type (`dict.fromkeys`, made anew at each access) by that type and its method definition (the
 * Tracer's key is the type and the name). Methods bound to a capsule are not cached: pybind11
 * makes such functions on the fly, each with a method definition freed with it. */
static int32_t c_nid(CTracer *t, PyObject *fn) {
    PyObject *key = NULL;
    const void *method = NULL;
    if (PyCFunction_Check(fn)) {
        PyObject *self = PyCFunction_GET_SELF(fn);
        if (self == NULL || PyModule_Check(self)) {
            key = fn;
        } else if (!PyCapsule_CheckExact(self)) {
            key = PyType_Check(self) ? self : (PyObject *)Py_TYPE(self);
            method = ((PyCFunctionObject *)fn)->m_ml;
        }
    } else if (Py_IS_TYPE(fn, &PyMethodDescr_Type) || Py_IS_TYPE(fn, &PyWrapperDescr_Type)) {
        key = fn; /* no __self__ */
    }
    if (key != NULL && t->n_slots) {
        Slot *s = slot_for(t, key, method);
        if (s->key != NULL) return info_nid(s->info);
    }
    int ok;
    int64_t nid = call_int(t, str_c_name, fn, NULL, &ok);
    if (!ok) return NAME_NOT_NOW;
    if (key != NULL && nid != NAME_NOT_NOW && cache_put(t, key, method, (int64_t)(uint32_t)nid) < 0) return NAME_NOT_NOW;
    return (int32_t)nid;
}

/* -- the hook ------------------------------------------------------------------------------- */

/* The handle of the engine's innermost open range on this thread, looked up again only when a
 * recorded range started or ended (the epoch) or the running task's context frame changed. */
static int64_t innermost(ThreadState *ts) {
    CTracer *t = ts->owner;
    PyObject *ctx = NULL;
    if (PyContextVar_Get(t->current_var, Py_None, &ctx) < 0) {
        report(t);
        return 0;
    }
    if (ctx == ts->ctx && t->gate[GATE_EPOCH] == ts->epoch) {
        Py_DECREF(ctx);
        return ts->user;
    }
    int ok;
    int64_t user = call_int(t, str_innermost, ts->info, NULL, &ok);
    Py_XSETREF(ts->ctx, ctx);
    ts->epoch = t->gate[GATE_EPOCH];
    ts->user = ok ? user : 0;
    return ts->user;
}

static inline int stopped(CTracer *t) { return t->stopped || t->gate[GATE_STOPPED]; }

static void enter(ThreadState *ts, PyObject *key, int32_t nid) {
    CTracer *t = ts->owner;
    int64_t *gate = t->gate;
    if (ts->sp >= t->max_depth) return;
    /* First, as it may run Python code, and so other threads (which may stop tracing). */
    int64_t user = innermost(ts);
    if (stopped(t)) return;
    if (gate[GATE_EVENTS] >= t->max_events) {
        gate[GATE_DROPPED]++;
        return;
    }
    if (ts->n == ts->cap || ts->sp == ts->stack_cap) {
        Py_ssize_t cap = ts->n == ts->cap ? (ts->cap ? ts->cap * 2 : 1024) : ts->cap;
        Py_ssize_t scap = ts->sp == ts->stack_cap ? (ts->stack_cap ? ts->stack_cap * 2 : 64) : ts->stack_cap;
        Row *rows = PyMem_Realloc(ts->rows, (size_t)cap * sizeof(Row));
        if (rows == NULL) return;
        ts->rows = rows;
        ts->cap = cap;
        Open *stack = PyMem_Realloc(ts->stack, (size_t)scap * sizeof(Open));
        if (stack == NULL) return;
        ts->stack = stack;
        ts->stack_cap = scap;
    }
    gate[GATE_EVENTS]++;
    ts->recorded++;
    Row *row = &ts->rows[ts->n];
    row->start = tick(ts);
    row->end = 0;
    row->user = user;
    row->nid = nid;
    row->parent = ts->sp ? (int32_t)ts->stack[ts->sp - 1].row : -1;
    Py_INCREF(key);
    ts->stack[ts->sp].key = key;
    ts->stack[ts->sp].row = ts->n;
    ts->stack[ts->sp].hidden = 0;
    ts->sp++;
    ts->n++;
}

/* Keep how many library calls were hidden under the traced call `open` (when any). */
static void keep_hidden(ThreadState *ts, const Open *open) {
    if (open->hidden == 0) return;
    if (ts->n_hidden == ts->hidden_cap) {
        Py_ssize_t cap = ts->hidden_cap ? ts->hidden_cap * 2 : 256;
        int64_t *grown = PyMem_Realloc(ts->hidden_rows, (size_t)cap * 2 * sizeof(int64_t));
        if (grown == NULL) return; /* the count is lost, the row is not */
        ts->hidden_rows = grown;
        ts->hidden_cap = cap;
    }
    ts->hidden_rows[2 * ts->n_hidden] = open->row;
    ts->hidden_rows[2 * ts->n_hidden + 1] = open->hidden;
    ts->n_hidden++;
}

/* Close `key`'s traced call if it is the open one on top; whether it was. */
static int leave(ThreadState *ts, PyObject *key) {
    if (ts->sp == 0 || ts->stack[ts->sp - 1].key != key) return 0;
    int64_t now = tick(ts);
    ts->sp--;
    ts->rows[ts->stack[ts->sp].row].end = now;
    keep_hidden(ts, &ts->stack[ts->sp]);
    Py_DECREF(key);
    return 1;
}

static void drop_stack(ThreadState *ts) {
    while (ts->sp > 0) {
        ts->sp--;
        keep_hidden(ts, &ts->stack[ts->sp]);
        Py_CLEAR(ts->stack[ts->sp].key);
    }
    while (ts->n_callers > 0) {
        ts->n_callers--;
        Py_CLEAR(ts->callers[ts->n_callers].key);
    }
}

/* -- time in Python code (3.10-3.11) -------------------------------------------------------- */

static inline int64_t span_clock(const ThreadState *ts) { return ts->tsc ? read_tsc() : now_ns(); }

static inline int runs_python(const ThreadState *ts) {
    return ts->n_runs == 0 || ts->runs[ts->n_runs - 1]; /* below the first call: Python */
}

/* The innermost call now runs `python` (1) or C (0) code, from `was`: close or open the Python
 * time (the clock is read only when this changes). */
static inline void runs_switch(ThreadState *ts, int was, int python) {
    if (was == python) return;
    int64_t now = span_clock(ts);
    if (was) ts->python_ticks += now - ts->python_since;
    else ts->python_since = now;
}

static void runs_push(ThreadState *ts, uint8_t python) {
    runs_switch(ts, runs_python(ts), python);
    if (ts->n_runs == ts->runs_cap) {
        Py_ssize_t cap = ts->runs_cap ? ts->runs_cap * 2 : 256;
        uint8_t *grown = PyMem_Realloc(ts->runs, (size_t)cap);
        if (grown == NULL) return;
        ts->runs = grown;
        ts->runs_cap = cap;
    }
    ts->runs[ts->n_runs++] = python;
}

static void runs_pop(ThreadState *ts) {
    if (ts->n_runs == 0) return; /* a frame that was running before tracing began */
    int was = ts->runs[--ts->n_runs];
    runs_switch(ts, was, runs_python(ts));
}

/* The time the thread ran Python code so far, in ns (0 where no profile function ran). */
static int64_t python_ns(ThreadState *ts) {
    if (ts->first_clocks.ns == 0) return 0;
    int64_t ticks = ts->python_ticks, now = span_clock(ts);
    if (runs_python(ts)) ticks += now - ts->python_since;
    if (!ts->tsc) return ticks;
    int64_t tsc = read_tsc_ordered(), ns = now_ns();
    int64_t span = tsc - ts->first_clocks.tsc;
    if (span <= 0) return 0;
    return (int64_t)((__int128)ticks * (ns - ts->first_clocks.ns) / span);
}

/* -- following user code (trace_user_code) ---------------------------------------------------
 * Every Python call pushes its kind on the thread's callers (popped by its own exit: a call's
 * key is its frame on 3.10-3.11, its code on 3.12+). User code is recorded; library code is
 * recorded when user code called it (an entry point), else only counted (hidden) on the
 * innermost traced call and its package. Library code that recfn called passes recfn's kind on,
 * so recfn's own work is neither recorded nor counted as hidden. */

/* The kind of the code that called `code` from a frame that was running before tracing began
 * (the callers are empty): `frame`'s caller on 3.10-3.11; on 3.12+ (no frame) the frame below
 * the running one, or the running one when `code`'s own frame is not complete yet. */
static int outer_caller_kind(ThreadState *ts, PyObject *code, PyFrameObject *frame) {
    PyFrameObject *back = NULL;
    if (frame != NULL) {
        back = PyFrame_GetBack(frame);
    } else {
        PyFrameObject *running = PyEval_GetFrame(); /* borrowed */
        if (running == NULL) return CODE_LIBRARY;
        PyCodeObject *running_code = PyFrame_GetCode(running);
        int is_callee = (PyObject *)running_code == code;
        Py_DECREF(running_code);
        back = is_callee ? PyFrame_GetBack(running) : (PyFrameObject *)Py_NewRef(running);
    }
    if (back == NULL) return CODE_LIBRARY; /* a thread's first frame */
    PyCodeObject *back_code = PyFrame_GetCode(back);
    int64_t info = code_info(ts, (PyObject *)back_code, back);
    Py_DECREF(back_code);
    Py_DECREF(back);
    return info < 0 ? CODE_LIBRARY : info_kind(info);
}

static int push_caller(ThreadState *ts, PyObject *key, int kind) {
    if (ts->n_callers == ts->callers_cap) {
        Py_ssize_t cap = ts->callers_cap ? ts->callers_cap * 2 : 64;
        Caller *grown = PyMem_Realloc(ts->callers, (size_t)cap * sizeof(Caller));
        if (grown == NULL) return -1;
        ts->callers = grown;
        ts->callers_cap = cap;
    }
    ts->callers[ts->n_callers].key = Py_NewRef(key);
    ts->callers[ts->n_callers].kind = kind;
    ts->n_callers++;
    return 0;
}

static inline void pop_caller(ThreadState *ts, PyObject *key) {
    if (ts->n_callers > 0 && ts->callers[ts->n_callers - 1].key == key) {
        ts->n_callers--;
        Py_DECREF(key);
    }
}

/* One library call counted, not recorded: on the innermost traced call and on its package. */
static void hide(ThreadState *ts, int64_t package) {
    if (ts->sp > 0) ts->stack[ts->sp - 1].hidden++;
    if (package >= ts->n_packages) {
        Py_ssize_t n = (Py_ssize_t)package + 16;
        int64_t *grown = PyMem_Realloc(ts->package_hidden, (size_t)n * sizeof(int64_t));
        if (grown == NULL) return;
        memset(grown + ts->n_packages, 0, (size_t)(n - ts->n_packages) * sizeof(int64_t));
        ts->package_hidden = grown;
        ts->n_packages = n;
    }
    ts->package_hidden[package]++;
}

/* A Python call while following user code; `key` is what its exit event will name. */
static void follow_call(ThreadState *ts, PyObject *code, PyFrameObject *frame, PyObject *key) {
    int64_t info = code_info(ts, code, frame);
    if (info < 0) return; /* cannot be named now: its callees see its caller's kind */
    int caller = ts->n_callers > 0 ? ts->callers[ts->n_callers - 1].kind
                                   : outer_caller_kind(ts, code, frame);
    int kind = info_kind(info);
    if (push_caller(ts, key, kind == CODE_LIBRARY && caller == CODE_RECFN ? CODE_RECFN : kind) < 0)
        return;
    int32_t nid = info_nid(info);
    if (kind == CODE_USER || (kind == CODE_LIBRARY && caller == CODE_USER)) {
        if (nid >= 0) enter(ts, key, nid);
    } else if (kind == CODE_LIBRARY && caller == CODE_LIBRARY) {
        hide(ts, info_package(info));
    }
}

/* Whether a C call made by `code` is recorded (trace_c_calls): made by user code when following
 * it, else by traced code; NAME_NOT_NOW-like -1 when `code` cannot be named now. */
static int records_c_calls_of(ThreadState *ts, PyObject *code, PyFrameObject *frame) {
    int64_t info = code_info(ts, code, frame);
    if (info < 0) return -1;
    return ts->owner->follow ? info_kind(info) == CODE_USER : info_nid(info) >= 0;
}

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    ThreadState *ts = (ThreadState *)obj;
    CTracer *t = ts->owner;
    if (stopped(t)) {
        drop_stack(ts);
        PyEval_SetProfile(NULL, NULL); /* the owner's list keeps ts alive */
        return 0;
    }
    if (ts->first_clocks.ns == 0) { /* the thread's first event under this hook */
        ts->first_clocks.tsc = ts->tsc ? read_tsc_ordered() : 0;
        ts->first_clocks.ns = now_ns();
        ts->python_since = span_clock(ts);
    }
    if (what == PyTrace_CALL || what == PyTrace_RETURN) {
        if (what == PyTrace_CALL) runs_push(ts, 1);
        else runs_pop(ts);
    } else if (what == PyTrace_C_CALL) {
        runs_push(ts, 0);
    } else if (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) {
        runs_pop(ts);
    }
    if (what == PyTrace_CALL) {
        ts->py_events++;
        PyCodeObject *code = PyFrame_GetCode(frame);
        if (t->follow) {
            follow_call(ts, (PyObject *)code, frame, (PyObject *)frame);
        } else {
            int32_t nid = code_nid(ts, (PyObject *)code, frame);
            if (nid >= 0) enter(ts, (PyObject *)frame, nid);
        }
        Py_DECREF(code);
    } else if (what == PyTrace_RETURN) {
        ts->py_events++;
        if (t->follow) pop_caller(ts, (PyObject *)frame);
        leave(ts, (PyObject *)frame);
    } else {
        ts->c_events++;
        if (t->c_calls && what == PyTrace_C_CALL) {
            /* only C calls made by traced (or user) code, never recfn's own, which may hold
             * its locks */
            PyCodeObject *code = PyFrame_GetCode(frame);
            int records = records_c_calls_of(ts, (PyObject *)code, frame);
            Py_DECREF(code);
            if (records > 0) {
                int32_t nid = c_nid(t, arg);
                if (nid >= 0) enter(ts, arg, nid);
            }
        } else if (t->c_calls && (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION)) {
            leave(ts, arg);
        }
    }
    return 0;
}

/* -- ThreadState ---------------------------------------------------------------------------- */

/* A new ThreadState for the calling thread; NULL with no error set while the Python Tracer
 * says the thread is still starting (it has no info yet). */
static ThreadState *thread_state(CTracer *t) {
    PyObject *info = PyObject_CallMethodNoArgs(t->tracer, str_thread_info);
    if (info == NULL) return NULL;
    if (info == Py_None) {
        Py_DECREF(info);
        return NULL;
    }
    ThreadState *ts = PyObject_GC_New(ThreadState, &ThreadStateType);
    if (ts == NULL) {
        Py_DECREF(info);
        return NULL;
    }
    Py_INCREF(t);
    ts->owner = t;
    ts->info = info;
    ts->rows = NULL;
    ts->stack = NULL;
    ts->n = ts->cap = ts->sp = ts->stack_cap = 0;
    ts->last_code = NULL;
    ts->last_info = NAME_NOT_NOW;
    ts->ctx = NULL;
    ts->epoch = ts->user = 0;
    ts->tsc = t->tsc;
    ts->n_anchors = ts->anchors_cap = 0;
    ts->anchor_due = ts->anchor_epoch = 0; /* the first read is an anchor */
    ts->narrowest = 0;
    ts->callers = NULL;
    ts->n_callers = ts->callers_cap = 0;
    ts->py_events = ts->c_events = ts->recorded = 0;
    ts->hidden_rows = NULL;
    ts->n_hidden = ts->hidden_cap = 0;
    ts->package_hidden = NULL;
    ts->n_packages = 0;
    ts->runs = NULL;
    ts->n_runs = ts->runs_cap = 0;
    ts->python_ticks = ts->python_since = 0;
    ts->first_clocks = (Anchor){0, 0};
    ts->anchors = t->tsc ? PyMem_Malloc(64 * sizeof(Anchor)) : NULL;
    if (t->tsc) {
        if (ts->anchors == NULL) {
            Py_DECREF(ts);
            PyErr_NoMemory();
            return NULL;
        }
        ts->anchors_cap = 64;
    }
    PyObject_GC_Track(ts);
    if (PyList_Append(t->threads, (PyObject *)ts) < 0) {
        Py_DECREF(ts);
        return NULL;
    }
    return ts;
}

static int ts_traverse(ThreadState *ts, visitproc visit, void *arg) {
    Py_VISIT(ts->owner);
    Py_VISIT(ts->info);
    Py_VISIT(ts->ctx);
    for (Py_ssize_t i = 0; i < ts->sp; i++) Py_VISIT(ts->stack[i].key);
    for (Py_ssize_t i = 0; i < ts->n_callers; i++) Py_VISIT(ts->callers[i].key);
    return 0;
}

static int ts_clear(ThreadState *ts) {
    drop_stack(ts);
    Py_CLEAR(ts->owner);
    Py_CLEAR(ts->info);
    Py_CLEAR(ts->ctx);
    return 0;
}

static void ts_dealloc(ThreadState *ts) {
    PyObject_GC_UnTrack(ts);
    ts_clear(ts);
    PyMem_Free(ts->rows);
    PyMem_Free(ts->stack);
    PyMem_Free(ts->anchors);
    PyMem_Free(ts->callers);
    PyMem_Free(ts->hidden_rows);
    PyMem_Free(ts->package_hidden);
    PyMem_Free(ts->runs);
    PyObject_GC_Del(ts);
}

static PyObject *ts_take(ThreadState *ts, PyObject *Py_UNUSED(ignored)) {
    /* The rows as bytes (start, end, user: int64; nid, parent: int32, native order); the frames
     * of calls still open are dropped (they would keep their locals alive). */
    drop_stack(ts);
    Py_CLEAR(ts->ctx);
    Py_ssize_t size = ts->n * (Py_ssize_t)sizeof(Row);
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL; /* the rows stay as they were: take() can be retried */
    rows_to_ns(ts);
    if (size) memcpy(PyBytes_AS_STRING(out), ts->rows, (size_t)size);
    PyMem_Free(ts->rows);
    ts->rows = NULL;
    ts->n = ts->cap = 0;
    ts->n_anchors = 0;
    return out;
}

static PyObject *ts_take_hidden(ThreadState *ts, PyObject *Py_UNUSED(ignored)) {
    /* (rows, packages): the (row, count) pairs of traced calls that hid library calls, and the
     * hidden calls by package number, as int64 bytes in native order; once tracing stopped
     * (the calls still open are closed first). */
    drop_stack(ts);
    PyObject *rows = PyBytes_FromStringAndSize((const char *)ts->hidden_rows,
                                               ts->n_hidden * 2 * (Py_ssize_t)sizeof(int64_t));
    PyObject *packages = PyBytes_FromStringAndSize(
        (const char *)ts->package_hidden, ts->n_packages * (Py_ssize_t)sizeof(int64_t));
    if (rows == NULL || packages == NULL) {
        Py_XDECREF(rows);
        Py_XDECREF(packages);
        return NULL;
    }
    ts->n_hidden = 0;
    if (ts->n_packages) memset(ts->package_hidden, 0, (size_t)ts->n_packages * sizeof(int64_t));
    return Py_BuildValue("(NN)", rows, packages);
}

static PyObject *ts_get_counts(ThreadState *ts, void *Py_UNUSED(closure)) {
    return Py_BuildValue("(LLLL)", (long long)ts->py_events, (long long)ts->c_events,
                         (long long)ts->recorded, (long long)python_ns(ts));
}

static PyObject *ts_get_info(ThreadState *ts, void *Py_UNUSED(closure)) {
    return Py_NewRef(ts->info ? ts->info : Py_None);
}

static PyMethodDef ts_methods[] = {
    {"take", (PyCFunction)ts_take, METH_NOARGS, "The thread's rows as bytes, once tracing stopped."},
    {"take_hidden", (PyCFunction)ts_take_hidden, METH_NOARGS,
     "(rows, packages): hidden library calls per traced row and per package, as int64 bytes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ts_getset[] = {
    {"info", (getter)ts_get_info, NULL, "What the Python Tracer keeps for this thread.", NULL},
    {"counts", (getter)ts_get_counts, NULL,
     "(callbacks on Python calls, callbacks on C calls, rows recorded, ns running Python code"
     " (3.10-3.11; else 0)) so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ThreadStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._ctrace.ThreadState",
    .tp_basicsize = sizeof(ThreadState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One thread's traced calls (its profile function's argument).",
    .tp_traverse = (traverseproc)ts_traverse,
    .tp_clear = (inquiry)ts_clear,
    .tp_dealloc = (destructor)ts_dealloc,
    .tp_methods = ts_methods,
    .tp_getset = ts_getset,
};

/* -- CTracer -------------------------------------------------------------------------------- */

static int ct_init(CTracer *t, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"tracer", "gate", "current_var", "max_events", "max_depth",
                             "clock_offset", "c_calls", "disable", "tsc", "follow", NULL};
    PyObject *tracer, *gate, *current_var, *disable = Py_None;
    long long max_events, max_depth, clock_offset;
    int c_calls, tsc = 0, follow = 0;
    if (t->tracer != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CTracer is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOLLLp|Opp", kwlist, &tracer, &gate,
                                     &current_var, &max_events, &max_depth, &clock_offset,
                                     &c_calls, &disable, &tsc, &follow))
        return -1;
    if (!PyContextVar_CheckExact(current_var)) {
        PyErr_SetString(PyExc_TypeError, "current_var must be a contextvars.ContextVar");
        return -1;
    }
    /* A vec marks its buffer read-only for Python, but the buffer is the storage that the
     * recorder's compiled code reads and writes: the hook writes the counters there too. */
    if (PyObject_GetBuffer(gate, &t->gate_view, PyBUF_FORMAT) < 0) return -1;
    if (t->gate_view.itemsize != 8 || t->gate_view.len < (Py_ssize_t)(GATE_SIZE * 8)) {
        PyBuffer_Release(&t->gate_view);
        PyErr_SetString(PyExc_ValueError, "gate must be a buffer of at least 4 int64");
        return -1;
    }
    t->threads = PyList_New(0);
    if (t->threads == NULL) {
        PyBuffer_Release(&t->gate_view);
        return -1;
    }
    t->gate = (int64_t *)t->gate_view.buf;
    t->tracer = Py_NewRef(tracer);
    t->current_var = Py_NewRef(current_var);
    t->disable = Py_NewRef(disable);
    t->serial = ++next_serial; /* under the GIL */
    t->max_events = max_events;
    t->max_depth = max_depth;
    t->clock_offset = clock_offset;
    t->c_calls = c_calls;
    t->follow = follow;
    t->tsc = tsc && kernel_uses_tsc;
    return 0;
}

static int ct_traverse(CTracer *t, visitproc visit, void *arg) {
    Py_VISIT(t->tracer);
    Py_VISIT(t->threads);
    Py_VISIT(t->gate_view.obj);
    Py_VISIT(t->disable);
    return 0;
}

static int ct_clear(CTracer *t) {
    Py_CLEAR(t->tracer);
    Py_CLEAR(t->threads);
    Py_CLEAR(t->current_var);
    Py_CLEAR(t->disable);
    return 0;
}

static void ct_dealloc(CTracer *t) {
    PyObject_GC_UnTrack(t);
    ct_clear(t);
    if (t->gate != NULL) PyBuffer_Release(&t->gate_view);
    for (Py_ssize_t i = 0; i < t->n_slots; i++) Py_XDECREF(t->slots[i].key);
    PyMem_Free(t->slots);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *ct_attach(CTracer *t, PyObject *Py_UNUSED(ignored)) {
    /* Install the hook on the calling thread. */
    if (t->tracer == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CTracer is not initialised");
        return NULL;
    }
    ThreadState *ts = thread_state(t);
    if (ts == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "this thread is starting");
        return NULL;
    }
    PyEval_SetProfile(hook, (PyObject *)ts);
    Py_DECREF(ts);
    Py_RETURN_NONE;
}

static PyObject *ct_thread_hook(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    /* threading.setprofile's hook: a new thread's first event installs the C hook there. */
    if (nargs != 3 || !PyFrame_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "thread_hook(frame, event, arg)");
        return NULL;
    }
    if (stopped(t)) {
        PyEval_SetProfile(NULL, NULL);
        Py_RETURN_NONE;
    }
    ThreadState *ts = thread_state(t);
    if (ts == NULL) { /* still starting: this hook sees its next event again */
        if (PyErr_Occurred()) report(t);
        Py_RETURN_NONE;
    }
    PyEval_SetProfile(hook, (PyObject *)ts);
    static const char *events[] = {"call", NULL, NULL, "return", "c_call", "c_exception", "c_return"};
    for (int what = 0; what < 7; what++) {
        if (events[what] && PyUnicode_CompareWithASCIIString(args[1], events[what]) == 0) {
            hook((PyObject *)ts, (PyFrameObject *)args[0], what, args[2]);
            break;
        }
    }
    Py_DECREF(ts);
    Py_RETURN_NONE;
}

static PyObject *ct_stop(CTracer *t, PyObject *Py_UNUSED(ignored)) {
    /* Stop recording on every thread; each drops its hook at its next event. */
    t->stopped = 1;
    Py_RETURN_NONE;
}

static PyObject *ct_get_threads(CTracer *t, void *Py_UNUSED(closure)) {
    return t->threads ? PyList_GetSlice(t->threads, 0, PyList_GET_SIZE(t->threads)) : PyList_New(0);
}

/* -- sys.monitoring callbacks (3.12+) ---------------------------------------------------------
 * They mirror the Python tracer's on_* methods: DISABLE for excluded code, but never from
 * PY_THROW or PY_UNWIND (sys.monitoring raises ValueError in the program for those). */

static ThreadState *monitored_thread(CTracer *t) {
    if (tl_serial == t->serial) return tl_state;
    ThreadState *ts = thread_state(t); /* NULL while a threading.Thread is still starting */
    if (ts == NULL) {
        if (PyErr_Occurred()) report(t);
        return NULL;
    }
    Py_DECREF(ts); /* the tracer's list keeps it */
    tl_state = ts;
    tl_serial = t->serial;
    return ts;
}

static PyObject *start_event(CTracer *t, PyObject *code, int may_disable) {
    ThreadState *ts = stopped(t) ? NULL : monitored_thread(t);
    if (ts != NULL) {
        ts->py_events++;
        if (t->follow) { /* every call is seen (and counted): nothing is disabled */
            follow_call(ts, code, NULL, code);
            Py_RETURN_NONE;
        }
        int32_t nid = code_nid(ts, code, NULL);
        if (nid >= 0) enter(ts, code, nid);
        else if (nid == NAME_EXCLUDED && may_disable) return Py_NewRef(t->disable);
    }
    Py_RETURN_NONE;
}

static PyObject *exit_event(CTracer *t, PyObject *code, int may_disable) {
    ThreadState *ts = stopped(t) ? NULL : monitored_thread(t);
    if (ts == NULL) Py_RETURN_NONE;
    ts->py_events++;
    if (t->follow) {
        pop_caller(ts, code);
        leave(ts, code);
        Py_RETURN_NONE;
    }
    if (!leave(ts, code) && may_disable && t->n_slots) {
        Slot *s = slot_for(t, code, NULL);
        if (s->key != NULL && info_nid(s->info) == NAME_EXCLUDED) return Py_NewRef(t->disable);
    }
    Py_RETURN_NONE;
}

static PyObject *ct_on_py_start(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    return nargs < 1 ? Py_NewRef(Py_None) : start_event(t, args[0], 1);
}

static PyObject *ct_on_py_throw(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    return nargs < 1 ? Py_NewRef(Py_None) : start_event(t, args[0], 0);
}

static PyObject *ct_on_py_exit(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    return nargs < 1 ? Py_NewRef(Py_None) : exit_event(t, args[0], 1);
}

static PyObject *ct_on_py_unwind(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    return nargs < 1 ? Py_NewRef(Py_None) : exit_event(t, args[0], 0);
}

static PyObject *ct_on_call(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || stopped(t)) Py_RETURN_NONE;
    ThreadState *ts = monitored_thread(t);
    if (ts == NULL) Py_RETURN_NONE;
    ts->c_events++;
    PyObject *fn = args[2];
    if (PyFunction_Check(fn) || PyMethod_Check(fn) || PyType_Check(fn)) Py_RETURN_NONE;
    /* only C calls made by traced (or user) code */
    int records = records_c_calls_of(ts, args[0], NULL);
    if (records <= 0) return Py_NewRef(records == 0 ? t->disable : Py_None); /* CALL is local */
    int32_t nid = c_nid(t, fn);
    if (nid >= 0) enter(ts, fn, nid);
    Py_RETURN_NONE;
}

static PyObject *ct_on_c_exit(CTracer *t, PyObject *const *args, Py_ssize_t nargs) {
    ThreadState *ts = stopped(t) || nargs < 3 ? NULL : monitored_thread(t);
    if (ts != NULL) {
        ts->c_events++;
        leave(ts, args[2]);
    }
    Py_RETURN_NONE;
}

#define CALLBACK(name) \
    {#name, (PyCFunction)(void (*)(void))ct_##name, METH_FASTCALL, "A sys.monitoring callback."}

static PyMethodDef ct_methods[] = {
    CALLBACK(on_py_start),
    CALLBACK(on_py_throw),
    CALLBACK(on_py_exit),
    CALLBACK(on_py_unwind),
    CALLBACK(on_call),
    CALLBACK(on_c_exit),
    {"attach", (PyCFunction)ct_attach, METH_NOARGS, "Install the hook on the calling thread."},
    {"thread_hook", (PyCFunction)(void (*)(void))ct_thread_hook, METH_FASTCALL,
     "threading.setprofile's hook: installs the C hook on a thread started while tracing."},
    {"stop", (PyCFunction)ct_stop, METH_NOARGS, "Stop recording on every thread."},
    {NULL, NULL, 0, NULL},
};

static PyObject *ct_get_tsc(CTracer *t, void *Py_UNUSED(closure)) { return PyBool_FromLong(t->tsc); }

static PyGetSetDef ct_getset[] = {
    {"threads", (getter)ct_get_threads, NULL, "The ThreadState of every traced thread.", NULL},
    {"tsc", (getter)ct_get_tsc, NULL, "Whether the hook reads the TSC (else clock_gettime).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CTracerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._ctrace.CTracer",
    .tp_basicsize = sizeof(CTracer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "CTracer(tracer, gate, current_var, max_events, max_depth, clock_offset, c_calls,"
              " disable=None, tsc=False): tsc reads the TSC where the kernel's clock is the TSC",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ct_init,
    .tp_traverse = (traverseproc)ct_traverse,
    .tp_clear = (inquiry)ct_clear,
    .tp_dealloc = (destructor)ct_dealloc,
    .tp_methods = ct_methods,
    .tp_getset = ct_getset,
};

/* interpolate(anchors, values): to_ns over int64 buffers, for tests: anchors (tsc, ns) pairs
 * increasing in both, values TSC values (0 kept). */
static PyObject *mod_interpolate(PyObject *Py_UNUSED(m), PyObject *args) {
    Py_buffer ab, vb;
    if (!PyArg_ParseTuple(args, "y*y*:interpolate", &ab, &vb)) return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = ab.len / (Py_ssize_t)sizeof(Anchor), nv = vb.len / 8;
    Anchor *a = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Anchor));
    if (a == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(a, ab.buf, (size_t)n * sizeof(Anchor));
    const int64_t limit = (int64_t)1 << 62; /* so that interpolation cannot overflow */
    int ok = n > 0 && ab.len % (Py_ssize_t)sizeof(Anchor) == 0 && vb.len % 8 == 0;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = a[i].tsc >= 0 && a[i].tsc < limit && a[i].ns >= 0 && a[i].ns < limit &&
             (i == 0 || (a[i].tsc > a[i - 1].tsc && a[i].ns >= a[i - 1].ns));
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "interpolate needs one or more int64 (tsc, ns) anchors "
                                          "in [0, 2**62), increasing in both, and int64 values");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, vb.len);
    if (out == NULL) goto done;
    Py_ssize_t hint = 0;
    for (Py_ssize_t i = 0; i < nv; i++) {
        int64_t v;
        memcpy(&v, (const char *)vb.buf + 8 * i, 8);
        v = v == 0 ? 0 : to_ns(a, n, &hint, v);
        memcpy(PyBytes_AS_STRING(out) + 8 * i, &v, 8);
    }
done:
    PyMem_Free(a);
    PyBuffer_Release(&ab);
    PyBuffer_Release(&vb);
    return out;
}

static PyMethodDef mod_methods[] = {
    {"interpolate", mod_interpolate, METH_VARARGS,
     "interpolate(anchors, values): TSC values (int64) in monotonic ns by the (tsc, ns) anchors,"
     " as take() converts rows; 0 stays 0."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "recfn.native._ctrace",
    .m_doc = "The C profile hook behind trace_calls.", .m_size = -1, .m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__ctrace(void) {
    kernel_uses_tsc = clocksource_is_tsc();
    if (PyType_Ready(&ThreadStateType) < 0 || PyType_Ready(&CTracerType) < 0) return NULL;
    if (!(str_code_name = PyUnicode_InternFromString("code_name")) ||
        !(str_c_name = PyUnicode_InternFromString("c_name")) ||
        !(str_innermost = PyUnicode_InternFromString("innermost")) ||
        !(str_thread_info = PyUnicode_InternFromString("thread_info")) ||
        !(str_report = PyUnicode_InternFromString("report")))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "CTracer", (PyObject *)&CTracerType) < 0 ||
        PyModule_AddObjectRef(m, "ThreadState", (PyObject *)&ThreadStateType) < 0 ||
        PyModule_AddIntConstant(m, "ROW_BYTES", (long)sizeof(Row)) < 0 ||
        PyModule_AddObjectRef(m, "TSC", kernel_uses_tsc ? Py_True : Py_False) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
