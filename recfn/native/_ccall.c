/* recfn.native._ccall: the call protocol of the compiled range classes, in C (compiled builds only).
 *
 * From interpreted code a with-block on a mypyc class pays for an argument tuple and the tuple
 * parser at construction, and for two bound-method objects (allocated, tracked by the garbage
 * collector, freed) to call __enter__ and __exit__; a decorated function pays for a Python
 * frame, an argument tuple and a keyword dict per call. This module removes those costs without
 * changing what runs: the class's own allocation and initialising method (install_constructor),
 * mypyc's own __enter__/__exit__ bound from a free list (install_bound_free_list) and a C
 * wrapper between the engine's begin_range and end_range (RangeCall). It relies on two facts
 * of the pinned mypyc: a compiled class lists "__internal_mypyc_setup" (METH_O, the type) in its
 * dict, and methods other than __init__ are fast-call wrappers; both are checked at install,
 * and a class that does not have them keeps Python's protocol. Everything runs under the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#ifndef RECFN_MYPYC_VERSION /* setup.py defines it: the mypyc the compiled modules were built with */
#define RECFN_MYPYC_VERSION "unknown"
#endif

static int check_args(const char *fn, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, nargs);
    return -1;
}

/* The PyMethodDef of cls's own method name, if it has the calling convention flags. */
static PyMethodDef *own_method(PyObject *cls, const char *name, int flags) {
    PyObject *descr = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, name);
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMethodDescr_Type)) return NULL;
    PyMethodDescrObject *method = (PyMethodDescrObject *)descr;
    if ((PyObject *)method->d_common.d_type != cls || method->d_method->ml_flags != flags)
        return NULL;
    return method->d_method;
}

/* ---- constructors ---------------------------------------------------------------------------
 * Calling a mypyc class from interpreted code packs the arguments into a tuple, parses them
 * with the tuple parser and runs type.__call__: about 40 ns of a with-block that costs 115 ns
 * when nothing listens. A type object's tp_vectorcall makes the call direct: this one runs the
 * class's own allocation (mypyc's __internal_mypyc_setup) and an initialising method of the
 * class that mypyc compiles with the fast-call convention, i.e. exactly what __init__ runs.
 * Calls with keywords or another number of arguments go through type.__call__ as before, so
 * their errors are __init__'s. */

typedef PyObject *(*SetupFn)(PyObject *type);
typedef PyObject *(*FastInitFn)(PyObject *self, PyObject *const *args, size_t nargs,
                                PyObject *kwnames);
typedef struct {
    PyTypeObject *type; /* strong */
    SetupFn setup;
    FastInitFn init;
    Py_ssize_t min_args, max_args;
} Maker;
#define MAX_MAKERS 4
static Maker makers[MAX_MAKERS];
static int n_makers;

static PyObject *call_type_slowly(PyObject *type, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    PyObject *kwargs = NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        kwargs = PyDict_New();
        for (Py_ssize_t i = 0; kwargs != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
                Py_CLEAR(kwargs);
        }
        if (kwargs == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    PyObject *made = PyType_Type.tp_call(type, tuple, kwargs);
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return made;
}

static PyObject *make_range(PyObject *type, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    for (int i = 0; i < n_makers; i++) {
        Maker *mk = &makers[i];
        if ((PyObject *)mk->type != type) continue;
        if (kwnames != NULL || nargs < mk->min_args || nargs > mk->max_args) break;
        PyObject *self = mk->setup(type);
        if (self == NULL) return NULL;
        PyObject *none = mk->init(self, args, (size_t)nargs, NULL);
        if (none == NULL) {
            Py_DECREF(self);
            return NULL;
        }
        Py_DECREF(none);
        return self;
    }
    return call_type_slowly(type, args, nargs, kwnames);
}

static PyObject *m_install_constructor(PyObject *Py_UNUSED(m), PyObject *const *args,
                                       Py_ssize_t nargs) {
    if (check_args("install_constructor", nargs, 4) < 0) return NULL;
    PyObject *cls = args[0];
    if (!PyType_Check(cls) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "install_constructor(cls: type, method: str, ...)");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL) return NULL;
    Py_ssize_t min_args = PyLong_AsSsize_t(args[2]), max_args = PyLong_AsSsize_t(args[3]);
    if ((min_args == -1 || max_args == -1) && PyErr_Occurred()) return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    for (int i = 0; i < n_makers; i++)
        if (makers[i].type == type) Py_RETURN_TRUE;
    /* Only a class mypyc compiled has both; anything else keeps type.__call__. */
    PyMethodDef *setup = own_method(cls, "__internal_mypyc_setup", METH_O);
    PyMethodDef *init = own_method(cls, name, METH_FASTCALL | METH_KEYWORDS);
    if (setup == NULL || init == NULL || n_makers == MAX_MAKERS || min_args < 0 ||
        max_args < min_args || type->tp_vectorcall != NULL)
        Py_RETURN_FALSE;
    makers[n_makers++] = (Maker){(PyTypeObject *)Py_NewRef(cls), (SetupFn)(void (*)(void))setup->ml_meth,
                                 (FastInitFn)(void (*)(void))init->ml_meth, min_args, max_args};
    type->tp_vectorcall = make_range;
    Py_RETURN_TRUE;
}

/* ---- RangeCall: the decorator's wrapper of a plain callable ---------------------------------
 * A Python wrapper costs a frame, an argument tuple and a keyword dict per call; this one hands
 * the caller's arguments to the function as they came (vectorcall) between the engine's
 * begin_range and end_range. Like functools' C wrappers it has a __dict__ (functools.wraps
 * fills it), binds as a method, and pickles by qualified name. */

typedef struct {
    PyObject_HEAD
    PyObject *fn, *name, *args, *scope, *begin, *end;
    PyObject *dict, *weaklist;
    vectorcallfunc vectorcall;
} RangeCall;

static PyTypeObject RangeCallType;

/* End rf after fn raised, as a try/finally does: fn's exception is the one being handled while
 * end runs (what end callbacks see, and the context of anything they raise, chained where it
 * is raised), and it propagates unless end raises. */
static void end_after_error(RangeCall *w, PyObject *rf) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised = PyErr_GetRaisedException();
    PyObject *handled = PyErr_GetHandledException();
    PyErr_SetHandledException(raised);
    PyObject *done = PyObject_Vectorcall(w->end, &rf, 1, NULL);
    PyErr_SetHandledException(handled);
    Py_XDECREF(handled);
    if (done == NULL) {
        Py_DECREF(raised);
        return;
    }
    Py_DECREF(done);
    PyErr_SetRaisedException(raised);
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) PyException_SetTraceback(value, tb);
    PyObject *htype, *hvalue, *htb;
    PyErr_GetExcInfo(&htype, &hvalue, &htb);
    Py_XINCREF(type);
    Py_XINCREF(value);
    Py_XINCREF(tb);
    PyErr_SetExcInfo(type, value, tb); /* steals the three */
    PyObject *done = PyObject_Vectorcall(w->end, &rf, 1, NULL);
    PyErr_SetExcInfo(htype, hvalue, htb);
    if (done == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return;
    }
    Py_DECREF(done);
    PyErr_Restore(type, value, tb);
#endif
}

static PyObject *rc_call(RangeCall *w, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames) {
    PyObject *begin_args[3] = {w->name, w->args, w->scope};
    PyObject *rf = PyObject_Vectorcall(w->begin, begin_args, 3, NULL);
    if (rf == NULL) return NULL;
    PyObject *out = PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
    if (rf == Py_None) {
        Py_DECREF(rf);
        return out;
    }
    if (out == NULL) {
        end_after_error(w, rf);
        Py_DECREF(rf);
        return NULL;
    }
    PyObject *done = PyObject_Vectorcall(w->end, &rf, 1, NULL);
    Py_DECREF(rf);
    if (done == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(done);
    return out;
}

static PyObject *rc_new(PyTypeObject *type, PyObject *a, PyObject *kw) {
    PyObject *fn, *name, *args, *scope, *begin, *end;
    static char *kwlist[] = {"fn", "name", "args", "scope", "begin", "end", NULL};
    if (!PyArg_ParseTupleAndKeywords(a, kw, "OUOO!OO:RangeCall", kwlist, &fn, &name, &args,
                                     &PyLong_Type, &scope, &begin, &end))
        return NULL;
    if (!PyCallable_Check(fn) || !PyCallable_Check(begin) || !PyCallable_Check(end) ||
        (args != Py_None && !PyUnicode_Check(args))) {
        PyErr_SetString(PyExc_TypeError,
                        "RangeCall(fn, name: str, args: str | None, scope: int, begin, end) "
                        "needs callables fn, begin and end");
        return NULL;
    }
    RangeCall *w = PyObject_GC_New(RangeCall, type);
    if (w == NULL) return NULL;
    w->fn = Py_NewRef(fn);
    w->name = Py_NewRef(name);
    w->args = Py_NewRef(args);
    w->scope = Py_NewRef(scope);
    w->begin = Py_NewRef(begin);
    w->end = Py_NewRef(end);
    w->dict = NULL;
    w->weaklist = NULL;
    w->vectorcall = (vectorcallfunc)rc_call;
    PyObject_GC_Track(w);
    return (PyObject *)w;
}

static int rc_traverse(RangeCall *w, visitproc visit, void *arg) {
    Py_VISIT(w->fn);
    Py_VISIT(w->begin);
    Py_VISIT(w->end);
    Py_VISIT(w->dict);
    return 0;
}

static int rc_clear(RangeCall *w) {
    Py_CLEAR(w->fn);
    Py_CLEAR(w->name);
    Py_CLEAR(w->args);
    Py_CLEAR(w->scope);
    Py_CLEAR(w->begin);
    Py_CLEAR(w->end);
    Py_CLEAR(w->dict);
    return 0;
}

static void rc_dealloc(RangeCall *w) {
    PyObject_GC_UnTrack(w);
    if (w->weaklist != NULL) PyObject_ClearWeakRefs((PyObject *)w);
    rc_clear(w);
    PyObject_GC_Del(w);
}

static PyObject *rc_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *rc_repr(RangeCall *w) {
    return PyUnicode_FromFormat("<recfn range %R around %R>", w->name, w->fn);
}

/* Pickled as the global it replaced (pickle looks the qualified name up in its module). */
static PyObject *rc_reduce(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef rc_methods[] = {
    {"__reduce__", rc_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rc_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RangeCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._ccall.RangeCall",
    .tp_doc = "RangeCall(fn, name, args, scope, begin, end): calls fn with the caller's "
              "arguments between begin(name, args, scope) and end(range) (none when begin "
              "returns None); what record_function's decorator returns for a plain function.",
    .tp_basicsize = sizeof(RangeCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = rc_new,
    .tp_dealloc = (destructor)rc_dealloc,
    .tp_traverse = (traverseproc)rc_traverse,
    .tp_clear = (inquiry)rc_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RangeCall, vectorcall),
    .tp_descr_get = rc_get,
    .tp_repr = (reprfunc)rc_repr,
    .tp_methods = rc_methods,
    .tp_getset = rc_getset,
    .tp_dictoffset = offsetof(RangeCall, dict),
    .tp_weaklistoffset = offsetof(RangeCall, weaklist),
};

/* ---- __enter__ and __exit__ bound from a free list ------------------------------------------
 * A with-block looks both methods up on the type and binds them to the object (a new builtin
 * method each, tracked by the garbage collector and freed at the block's end: about a fifth of
 * a quiet with-block). install_bound_free_list puts a Special in the class's dict instead of
 * mypyc's method descriptor: it calls the same mypyc wrapper, unbound (obj.m() with the method
 * descriptor flag) or bound through a Bound taken from a free list. */

typedef struct {
    PyObject_HEAD
    PyMethodDef *def; /* mypyc's fast-call wrapper */
    PyTypeObject *type; /* strong: the class whose dict holds it */
    vectorcallfunc vectorcall;
} Special;

typedef struct {
    PyObject_HEAD
    PyObject *self;
    Special *special; /* strong */
    vectorcallfunc vectorcall;
} Bound;

static PyTypeObject SpecialType, BoundType;
#define BOUND_FREE_MAX 64
static Bound *bound_free[BOUND_FREE_MAX];
static int n_bound_free;

typedef PyObject *(*FastWithKeywords)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
static PyObject *bound_call(Bound *b, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static int check_self(Special *sp, PyObject *self) {
    if (PyObject_TypeCheck(self, sp->type)) return 0;
    PyErr_Format(PyExc_TypeError, "descriptor '%s' for '%s' objects doesn't apply to a '%s' object",
                 sp->def->ml_name, sp->type->tp_name, Py_TYPE(self)->tp_name);
    return -1;
}

static PyObject *special_call(Special *sp, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "unbound method %s.%s() needs an argument",
                     sp->type->tp_name, sp->def->ml_name);
        return NULL;
    }
    if (check_self(sp, args[0]) < 0) return NULL;
    return ((FastWithKeywords)(void (*)(void))sp->def->ml_meth)(args[0], args + 1, nargs - 1,
                                                                 kwnames);
}

static PyObject *special_get(Special *sp, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL) return Py_NewRef(sp);
    if (check_self(sp, obj) < 0) return NULL;
    Bound *b;
    if (n_bound_free > 0) {
        b = bound_free[--n_bound_free];
        PyObject_Init((PyObject *)b, &BoundType);
    } else {
        b = PyObject_GC_New(Bound, &BoundType);
        if (b == NULL) return NULL;
    }
    b->self = Py_NewRef(obj);
    b->special = (Special *)Py_NewRef(sp);
    b->vectorcall = (vectorcallfunc)bound_call;
    PyObject_GC_Track(b);
    return (PyObject *)b;
}

static PyObject *bound_call(Bound *b, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return ((FastWithKeywords)(void (*)(void))b->special->def->ml_meth)(
        b->self, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static int bound_traverse(Bound *b, visitproc visit, void *arg) {
    Py_VISIT(b->self);
    return 0;
}

static int bound_clear(Bound *b) {
    Py_CLEAR(b->self);
    return 0;
}

static void bound_dealloc(Bound *b) {
    PyObject_GC_UnTrack(b);
    Py_CLEAR(b->self); /* may run the range's own teardown: b is on no list yet */
    Py_CLEAR(b->special);
    if (n_bound_free < BOUND_FREE_MAX) {
        bound_free[n_bound_free++] = b;
        return;
    }
    PyObject_GC_Del(b);
}

static PyObject *bound_repr(Bound *b) {
    return PyUnicode_FromFormat("<bound method %s of %R>", b->special->def->ml_name, b->self);
}

static PyObject *bound_self(Bound *b, void *Py_UNUSED(closure)) { return Py_NewRef(b->self); }

static PyObject *bound_name(Bound *b, void *Py_UNUSED(closure)) {
    return PyUnicode_FromString(b->special->def->ml_name);
}

static PyGetSetDef bound_getset[] = {
    {"__self__", (getter)bound_self, NULL, NULL, NULL},
    {"__name__", (getter)bound_name, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._ccall.Bound",
    .tp_doc = "A Special bound to an object.",
    .tp_basicsize = sizeof(Bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_traverse = (traverseproc)bound_traverse,
    .tp_clear = (inquiry)bound_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_repr = (reprfunc)bound_repr,
    .tp_getset = bound_getset,
};

static void special_dealloc(Special *sp) {
    Py_CLEAR(sp->type);
    PyObject_Free(sp);
}

static PyObject *special_repr(Special *sp) {
    return PyUnicode_FromFormat("<method '%s' of '%s' objects>", sp->def->ml_name,
                                sp->type->tp_name);
}

static PyObject *special_name(Special *sp, void *Py_UNUSED(closure)) {
    return PyUnicode_FromString(sp->def->ml_name);
}

static PyObject *special_objclass(Special *sp, void *Py_UNUSED(closure)) {
    return Py_NewRef(sp->type);
}

static PyGetSetDef special_getset[] = {
    {"__name__", (getter)special_name, NULL, NULL, NULL},
    {"__objclass__", (getter)special_objclass, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SpecialType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recfn.native._ccall.Special",
    .tp_doc = "A compiled class's method, bound from a free list.",
    .tp_basicsize = sizeof(Special),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_dealloc = (destructor)special_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Special, vectorcall),
    .tp_descr_get = (descrgetfunc)special_get,
    .tp_repr = (reprfunc)special_repr,
    .tp_getset = special_getset,
};

static PyObject *m_install_bound_free_list(PyObject *Py_UNUSED(m), PyObject *const *args,
                                           Py_ssize_t nargs) {
    if (check_args("install_bound_free_list", nargs, 2) < 0) return NULL;
    PyObject *cls = args[0];
    if (!PyType_Check(cls) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "install_bound_free_list(cls: type, method: str)");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[1]);
    if (name == NULL) return NULL;
    PyObject *dict = ((PyTypeObject *)cls)->tp_dict;
    PyObject *now = PyDict_GetItemWithError(dict, args[1]);
    if (now != NULL && Py_IS_TYPE(now, &SpecialType)) Py_RETURN_TRUE;
    if (PyErr_Occurred()) return NULL;
    PyMethodDef *def = own_method(cls, name, METH_FASTCALL | METH_KEYWORDS);
    if (def == NULL || own_method(cls, "__internal_mypyc_setup", METH_O) == NULL)
        Py_RETURN_FALSE;
    Special *sp = PyObject_New(Special, &SpecialType);
    if (sp == NULL) return NULL;
    sp->def = def;
    sp->type = (PyTypeObject *)Py_NewRef(cls);
    sp->vectorcall = (vectorcallfunc)special_call;
    int stored = PyDict_SetItem(dict, args[1], (PyObject *)sp);
    Py_DECREF(sp);
    if (stored < 0) return NULL;
    PyType_Modified((PyTypeObject *)cls);
    Py_RETURN_TRUE;
}

static PyMethodDef module_methods[] = {
    {"install_constructor", (PyCFunction)(void (*)(void))m_install_constructor, METH_FASTCALL,
     "install_constructor(cls, method, min_args, max_args) -> bool: make cls(*args) with "
     "min_args..max_args positional arguments run mypyc's allocation and cls.method(*args) "
     "directly (False, and nothing changed, unless cls is compiled by mypyc and defines "
     "method with the fast-call convention)."},
    {"install_bound_free_list", (PyCFunction)(void (*)(void))m_install_bound_free_list,
     METH_FASTCALL,
     "install_bound_free_list(cls, method) -> bool: bind cls.method (mypyc's, defined by cls) "
     "from a free list instead of a new builtin method per lookup (False, and nothing "
     "changed, unless cls is compiled by mypyc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "recfn.native._ccall",
    .m_doc = "The call protocol of the compiled range classes, in C.", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__ccall(void) {
    if (PyType_Ready(&RangeCallType) < 0 || PyType_Ready(&SpecialType) < 0 ||
        PyType_Ready(&BoundType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "RangeCall", (PyObject *)&RangeCallType) < 0 ||
        PyModule_AddStringConstant(m, "MYPYC_VERSION", RECFN_MYPYC_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
