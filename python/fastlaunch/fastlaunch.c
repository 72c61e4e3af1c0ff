/* kjit._fastlaunch: a held kernel's launch from Python in C, against CPython's stable ABI (abi3,
 * 3.11+), so that one build serves every interpreter from 3.11 on, as the pure-Python package
 * does.
 *
 * A Launcher packs the common call (torch tensors on the kernel's device, exact ints and floats,
 * int grids and blocks, the default or an int stream) into kjit_kernel_launch_packed's buffer and
 * calls it, with no ctypes and no Python frame. Any other call (other argument types, a bad value,
 * a missing keyword) goes whole to the package's Python launcher, which converts, checks and
 * reports exactly as it does without this module: the two paths cannot disagree on what they
 * accept. The launch function arrives as an address from the package's loaded libkjit_c.so, so
 * the module links nothing but the interpreter. */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h> /* PyMemberDef and T_PYSSIZET, in Python.h from 3.12 on */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The vectorcall protocol (PEP 590): the caller passes the arguments as an array and the keywords'
 * names as a tuple, so a call with keywords builds no tuple and no dict. Its ABI is stable from
 * CPython 3.8 on and part of the limited API from 3.12; 3.11's limited headers do not declare it,
 * so its flag, offset bit and function type are spelled here with the values 3.12 makes stable.
 * PyType_FromSpec takes the slot's offset from the __vectorcalloffset__ member since 3.9. */
typedef PyObject *(*vectorcall_fn)(PyObject *callable, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames);
#define KJIT_TPFLAGS_HAVE_VECTORCALL (1UL << 11)
#define KJIT_VECTORCALL_ARGUMENTS_OFFSET ((size_t)1 << (8 * sizeof(size_t) - 1))

typedef int (*launch_packed_fn)(const void *kernel, const void *packed);

/* The launch config at the start of the packed buffer (kjit/c.h's kjit_launch_config). */
typedef struct {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t reserved;
  uint64_t stream;
} launch_config;

/* INLINE_BYTES: a packed launch that fits is built on the stack. TUPLE_ARGS: the most arguments
 * a tp_call (not vectorcall) launch packs in C; more go to the Python launcher. */
enum { CONFIG_BYTES = sizeof(launch_config), INLINE_BYTES = 512, TUPLE_ARGS = 64 };

typedef struct {
  PyObject_HEAD vectorcall_fn vectorcall;
  void *kernel;
  launch_packed_fn launch;
  Py_ssize_t count;
  char *codes;       /* struct codes: 'P' a device pointer, else b B h H i I q Q f d */
  uint32_t *offsets; /* of each argument in the packed buffer */
  uint32_t packed_size;
  long device;
  PyObject *device_object;
  PyObject *tensor_type;    /* torch.Tensor, or None */
  PyObject *get_device;     /* torch.Tensor.get_device and .data_ptr, called with the tensor: */
  PyObject *data_ptr;       /* no attribute lookup on the instance */
  PyObject *current_stream; /* device -> int */
  PyObject *error;          /* status -> the kjit.Error to raise */
  PyObject *fallback;       /* the Python launcher */
  PyObject *dict;           /* attributes: a kjit.Kernel's name, device... */
} Launcher;

static PyObject *get_device_name, *data_ptr_name;
static PyObject *grid_name, *block_name, *shared_name, *stream_name;

/* An exact int in [low, high], or -1 (no Python error left set). */
static int exact_int(PyObject *value, long long low, unsigned long long high,
                     unsigned long long *out) {
  if (!PyLong_CheckExact(value))
    return -1;
  if (low >= 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(value);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return -1;
    }
    if (u < (unsigned long long)low || u > high)
      return -1;
    *out = u;
    return 0;
  }
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow || (s == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return -1;
  }
  if (s < low || (s > 0 && (unsigned long long)s > high))
    return -1;
  *out = (unsigned long long)s;
  return 0;
}

/* A grid or block: an exact positive int, or a tuple of 1 to 3 of them, each fitting 32 bits. */
static int dim3(PyObject *value, uint32_t out[3]) {
  unsigned long long v;
  out[0] = out[1] = out[2] = 1;
  if (PyLong_CheckExact(value)) {
    if (exact_int(value, 1, UINT32_MAX, &v))
      return -1;
    out[0] = (uint32_t)v;
    return 0;
  }
  if (!PyTuple_CheckExact(value))
    return -1;
  Py_ssize_t n = PyTuple_Size(value);
  if (n < 1 || n > 3)
    return -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (exact_int(PyTuple_GetItem(value, i), 1, UINT32_MAX, &v))
      return -1;
    out[i] = (uint32_t)v;
  }
  return 0;
}

/* The int `method(object)` returns, as an unsigned or signed 64-bit value. */
static int call_for_int(PyObject *object, PyObject *method, long long low, uint64_t *out) {
  PyObject *result = PyObject_CallFunctionObjArgs(method, object, NULL);
  if (!result)
    return -2; /* a Python error, to propagate */
  unsigned long long v;
  int failed = exact_int(result, low, UINT64_MAX, &v);
  Py_DECREF(result);
  *out = v;
  return failed;
}

/* Argument `code` from `value` into `slot`: 0 done, -1 not the fast case, -2 a Python error. */
static int pack_argument(Launcher *self, char code, PyObject *value, unsigned char *slot) {
  unsigned long long v;
  switch (code) {
  case 'P': {
    uint64_t address;
    if (self->tensor_type != Py_None && (PyObject *)Py_TYPE(value) == self->tensor_type) {
      uint64_t device;
      int status = call_for_int(value, self->get_device, INT64_MIN, &device);
      if (status)
        return status;
      if ((long long)device != self->device)
        return -1;
      status = call_for_int(value, self->data_ptr, 0, &address);
      if (status)
        return status;
    } else if (exact_int(value, 0, UINT64_MAX, &v) == 0) {
      address = v;
    } else {
      return -1;
    }
    memcpy(slot, &address, sizeof address);
    return 0;
  }
  case 'f':
  case 'd': {
    double d;
    if (PyFloat_CheckExact(value)) {
      d = PyFloat_AsDouble(value);
    } else if (PyLong_CheckExact(value)) {
      d = PyLong_AsDouble(value);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
      }
    } else {
      return -1;
    }
    if (code == 'd') {
      memcpy(slot, &d, sizeof d);
      return 0;
    }
    float f = (float)d;
    if (isinf(f) && !isinf(d))
      return -1; /* struct.pack's overflow: the Python path reports it */
    memcpy(slot, &f, sizeof f);
    return 0;
  }
  }
  /* The integers: their range as struct's native codes check it. */
  static const struct {
    char code;
    int bytes;
    long long low;
    unsigned long long high;
  } ranges[] = {{'b', 1, INT8_MIN, INT8_MAX},   {'B', 1, 0, UINT8_MAX},
                {'h', 2, INT16_MIN, INT16_MAX}, {'H', 2, 0, UINT16_MAX},
                {'i', 4, INT32_MIN, INT32_MAX}, {'I', 4, 0, UINT32_MAX},
                {'q', 8, INT64_MIN, INT64_MAX}, {'Q', 8, 0, UINT64_MAX}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; ++i) {
    if (ranges[i].code != code)
      continue;
    if (exact_int(value, ranges[i].low, ranges[i].high, &v))
      return -1;
    /* Little-endian x86-64 and AArch64: the low bytes are the value, signed or not. */
    memcpy(slot, &v, (size_t)ranges[i].bytes);
    return 0;
  }
  return -1;
}

/* The launch keywords of one call; NULL where not given. */
typedef struct {
  PyObject *grid, *block, *shared, *stream;
} keywords;

static int matches(PyObject *key, PyObject *name) {
  return key == name || PyUnicode_Compare(key, name) == 0;
}

/* Records keyword `key`: 0, or -1 for a keyword that is none of the launch's. */
static int take_keyword(keywords *given, PyObject *key, PyObject *value) {
  if (matches(key, grid_name))
    given->grid = value;
  else if (matches(key, block_name))
    given->block = value;
  else if (matches(key, shared_name))
    given->shared = value;
  else if (matches(key, stream_name))
    given->stream = value;
  else
    return -1;
  return 0;
}

/* The launch config from the keywords: 0 done, -1 not the fast case, -2 a Python error. */
static int pack_config(Launcher *self, const keywords *given, launch_config *config) {
  if (!given->grid || !given->block || dim3(given->grid, config->grid) ||
      dim3(given->block, config->block))
    return -1;
  unsigned long long v = 0;
  if (given->shared && exact_int(given->shared, 0, UINT32_MAX, &v))
    return -1;
  config->shared_bytes = (uint32_t)v;
  config->reserved = 0;
  if (!given->stream || given->stream == Py_None) {
    PyObject *handle =
        PyObject_CallFunctionObjArgs(self->current_stream, self->device_object, NULL);
    if (!handle)
      return -2;
    int failed = exact_int(handle, 0, UINT64_MAX, &v);
    Py_DECREF(handle);
    if (failed)
      return -1;
  } else if (exact_int(given->stream, 0, UINT64_MAX, &v)) {
    return -1;
  }
  config->stream = v;
  return 0;
}

/* Packs and launches `args[0..count)` with `given`: Py_None done, NULL a Python error raised, or
 * `self` itself (not a new reference) when the call is not the fast case. */
static PyObject *launch(Launcher *self, PyObject *const *args, const keywords *given) {
  unsigned char inline_buffer[INLINE_BYTES];
  unsigned char *packed = inline_buffer;
  if (self->packed_size > INLINE_BYTES) {
    packed = PyMem_Malloc(self->packed_size);
    if (!packed)
      return PyErr_NoMemory();
  }
  memset(packed, 0, self->packed_size);
  int status = pack_config(self, given, (launch_config *)packed);
  for (Py_ssize_t i = 0; status == 0 && i < self->count; ++i)
    status = pack_argument(self, self->codes[i], args[i], packed + self->offsets[i]);
  int result = status == 0 ? self->launch(self->kernel, packed) : 0;
  if (packed != inline_buffer)
    PyMem_Free(packed);
  if (status == -2)
    return NULL;
  if (status == -1)
    return (PyObject *)self;
  if (result == 0)
    Py_RETURN_NONE;
  PyObject *error = PyObject_CallFunction(self->error, "i", result);
  if (error) {
    PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    Py_DECREF(error);
  }
  return NULL;
}

/* k(*args, **kwargs) through tp_call: an interpreter or caller without vectorcall. */
static PyObject *launcher_call(PyObject *object, PyObject *args, PyObject *kwargs) {
  Launcher *self = (Launcher *)object;
  keywords given = {NULL, NULL, NULL, NULL};
  PyObject *key, *value;
  Py_ssize_t position = 0;
  int fast = PyTuple_Size(args) == self->count && kwargs != NULL;
  while (fast && PyDict_Next(kwargs, &position, &key, &value))
    fast = take_keyword(&given, key, value) == 0;
  if (fast) {
    PyObject *items[TUPLE_ARGS];
    if (self->count <= TUPLE_ARGS) {
      for (Py_ssize_t i = 0; i < self->count; ++i)
        items[i] = PyTuple_GetItem(args, i);
      PyObject *done = launch(self, items, &given);
      if (done != object)
        return done;
    }
  }
  return PyObject_Call(self->fallback, args, kwargs);
}

/* The Python launcher called with a vectorcall's arguments (the slow path: a tuple and a dict). */
static PyObject *call_fallback(Launcher *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
  PyObject *tuple = PyTuple_New(nargs), *kwargs = PyDict_New(), *result = NULL;
  if (!tuple || !kwargs)
    goto done;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SetItem(tuple, i, args[i]);
  }
  Py_ssize_t named = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t i = 0; i < named; ++i)
    if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, i), args[nargs + i]))
      goto done;
  result = PyObject_Call(self->fallback, tuple, kwargs);
done:
  Py_XDECREF(tuple);
  Py_XDECREF(kwargs);
  return result;
}

/* k(*args, **kwargs) through vectorcall: the arguments in place, the keywords' names a tuple. */
static PyObject *launcher_vectorcall(PyObject *object, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
  Launcher *self = (Launcher *)object;
  const Py_ssize_t nargs = (Py_ssize_t)(nargsf & ~KJIT_VECTORCALL_ARGUMENTS_OFFSET);
  keywords given = {NULL, NULL, NULL, NULL};
  int fast = nargs == self->count && kwnames != NULL;
  Py_ssize_t named = fast ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t i = 0; fast && i < named; ++i)
    fast = take_keyword(&given, PyTuple_GetItem(kwnames, i), args[nargs + i]) == 0;
  if (fast) {
    PyObject *done = launch(self, args, &given);
    if (done != object)
      return done;
  }
  return call_fallback(self, args, nargs, kwnames);
}

static int launcher_traverse(PyObject *object, visitproc visit, void *arg) {
  Launcher *self = (Launcher *)object;
  Py_VISIT(Py_TYPE(object));
  Py_VISIT(self->device_object);
  Py_VISIT(self->tensor_type);
  Py_VISIT(self->get_device);
  Py_VISIT(self->data_ptr);
  Py_VISIT(self->current_stream);
  Py_VISIT(self->error);
  Py_VISIT(self->fallback);
  Py_VISIT(self->dict);
  return 0;
}

static int launcher_clear(PyObject *object) {
  Launcher *self = (Launcher *)object;
  Py_CLEAR(self->device_object);
  Py_CLEAR(self->tensor_type);
  Py_CLEAR(self->get_device);
  Py_CLEAR(self->data_ptr);
  Py_CLEAR(self->current_stream);
  Py_CLEAR(self->error);
  Py_CLEAR(self->fallback);
  Py_CLEAR(self->dict);
  return 0;
}

static void launcher_dealloc(PyObject *object) {
  Launcher *self = (Launcher *)object;
  PyTypeObject *type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  launcher_clear(object);
  PyMem_Free(self->codes);
  PyMem_Free(self->offsets);
  freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_object(object);
  Py_DECREF(type);
}

/* Launcher(kernel, launch, codes, offsets, packed_size, device, tensor_type, current_stream,
 *          error, fallback) */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  unsigned long long kernel, launch;
  const char *codes;
  Py_ssize_t count;
  PyObject *offsets, *device, *tensor_type, *current_stream, *error, *fallback;
  unsigned int packed_size;
  if (kwargs && PyDict_Size(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "KKs#OIOOOOO", &kernel, &launch, &codes, &count, &offsets,
                        &packed_size, &device, &tensor_type, &current_stream, &error, &fallback))
    return NULL;
  if (!launch || PyTuple_Size(offsets) != count || packed_size < CONFIG_BYTES ||
      !PyLong_CheckExact(device) || !PyCallable_Check(current_stream) || !PyCallable_Check(error) ||
      !PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_ValueError, "Launcher: inconsistent layout or callables");
    return NULL;
  }
  Launcher *self = (Launcher *)PyType_GenericAlloc(type, 0);
  if (!self)
    return NULL;
  self->codes = PyMem_Malloc((size_t)count + 1);
  self->offsets = PyMem_Malloc(sizeof(uint32_t) * ((size_t)count + 1));
  if (!self->codes || !self->offsets) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < count; ++i) {
    unsigned long long offset;
    if (!strchr("PbBhHiIqQfd", codes[i]) ||
        exact_int(PyTuple_GetItem(offsets, i), CONFIG_BYTES, packed_size - 8, &offset)) {
      PyErr_Format(PyExc_ValueError, "Launcher: argument %zd: code or offset out of range", i);
      Py_DECREF(self);
      return NULL;
    }
    self->codes[i] = codes[i];
    self->offsets[i] = (uint32_t)offset;
  }
  self->kernel = (void *)(uintptr_t)kernel;
  self->launch = (launch_packed_fn)(uintptr_t)launch;
  self->count = count;
  self->packed_size = packed_size;
  self->device = PyLong_AsLong(device);
  Py_INCREF(device);
  self->device_object = device;
  Py_INCREF(tensor_type);
  self->tensor_type = tensor_type;
  if (tensor_type != Py_None) {
    self->get_device = PyObject_GetAttr(tensor_type, get_device_name);
    self->data_ptr = PyObject_GetAttr(tensor_type, data_ptr_name);
    if (!self->get_device || !self->data_ptr) {
      Py_DECREF(self);
      return NULL;
    }
  }
  self->vectorcall = launcher_vectorcall;
  Py_INCREF(current_stream);
  self->current_stream = current_stream;
  Py_INCREF(error);
  self->error = error;
  Py_INCREF(fallback);
  self->fallback = fallback;
  return (PyObject *)self;
}

static PyMemberDef launcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Launcher, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(Launcher, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_members, launcher_members},
    {Py_tp_doc, "A kernel's launch, packed in C; other calls go to the Python launcher."},
    {Py_tp_new, launcher_new},
    {Py_tp_call, launcher_call},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_dealloc, launcher_dealloc},
    {0, NULL},
};

static PyType_Spec launcher_spec = {.name = "kjit._fastlaunch.Launcher",
                                    .basicsize = sizeof(Launcher),
                                    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                             Py_TPFLAGS_BASETYPE | KJIT_TPFLAGS_HAVE_VECTORCALL,
                                    .slots = launcher_slots};

/* kjit.Kernel's C form: a Launcher that is also an instance of the package's Python `Kernel`
 * class. Made here rather than by a Python class statement because a Python subclass does not
 * inherit vectorcall before CPython 3.12: this one declares it, so k(...) reaches the Launcher's
 * vectorcall on every interpreter. */
static PyType_Slot kernel_slots[] = {
    {Py_tp_doc, "A loaded kernel whose call is its Launcher's."},
    {Py_tp_members, launcher_members},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_dealloc, launcher_dealloc},
    {0, NULL},
};

static PyType_Spec kernel_spec = {.name = "kjit.Kernel",
                                  .basicsize = sizeof(Launcher),
                                  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                           KJIT_TPFLAGS_HAVE_VECTORCALL,
                                  .slots = kernel_slots};

/* kernel_type(base): the type deriving from Launcher and the Python class `base`. */
static PyObject *kernel_type(PyObject *module, PyObject *base) {
  PyObject *launcher = PyObject_GetAttrString(module, "Launcher");
  if (!launcher)
    return NULL;
  PyObject *bases = PyTuple_Pack(2, launcher, base);
  Py_DECREF(launcher);
  if (!bases)
    return NULL;
  PyObject *type = PyType_FromSpecWithBases(&kernel_spec, bases);
  Py_DECREF(bases);
  return type;
}

static PyMethodDef module_methods[] = {
    {"kernel_type", kernel_type, METH_O, "The C kernel type over the Python class given."},
    {NULL, NULL, 0, NULL},
};

static int intern(PyObject **name, const char *text) {
  *name = PyUnicode_InternFromString(text);
  return *name ? 0 : -1;
}

static int module_exec(PyObject *module) {
  if (intern(&get_device_name, "get_device") || intern(&data_ptr_name, "data_ptr") ||
      intern(&grid_name, "grid") || intern(&block_name, "block") ||
      intern(&shared_name, "shared_bytes") || intern(&stream_name, "stream"))
    return -1;
  PyObject *type = PyType_FromSpec(&launcher_spec);
  if (!type)
    return -1;
  int status = PyModule_AddObjectRef(module, "Launcher", type);
  Py_DECREF(type);
  return status;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, module_exec}, {0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, .m_name = "_fastlaunch",
                                        .m_doc = "kjit's launch path in C (stable ABI).",
                                        .m_methods = module_methods, .m_slots = module_slots};

PyMODINIT_FUNC PyInit__fastlaunch(void) { return PyModuleDef_Init(&module_def); }
