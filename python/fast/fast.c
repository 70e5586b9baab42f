/* jitune._fast: the hot op calls of jitune.torch without ctypes' per-argument conversion (about 1 µs a call of
 * the 4-13 µs an eager op costs in Python). Built against CPython's stable ABI (Py_LIMITED_API 3.10), so one
 * binary serves every Python from 3.10 on, as the ctypes path does. It does not link libjitune: jitune/_lib.py
 * loads the library with ctypes and hands the addresses of the functions below to bind(), so both paths call the
 * one loaded copy (and its thread-local jitune_last_error()). Each function takes the C ABI's arguments in order,
 * pointers as Python ints, and returns the jitune_status as an int; the GIL is released while libjitune runs (a
 * cold call compiles with NVRTC). A wrong argument raises TypeError / OverflowError; nothing is called then. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jitune/jitune.h>

static __typeof__(jitune_elementwise)* p_elementwise;
static __typeof__(jitune_permute)* p_permute;
static __typeof__(jitune_index_add)* p_index_add;
static __typeof__(jitune_scatter_add)* p_scatter_add;
static __typeof__(jitune_dot)* p_dot;
static __typeof__(jitune_reduce_rows)* p_reduce_rows;
static __typeof__(jitune_upsample_nearest2d)* p_upsample;
static __typeof__(jitune_upsample_nearest2d_backward)* p_upsample_backward;

enum { kMaxDims = 8, kMaxInputs = 8 };

/* Python int -> pointer / int64 / int; each returns 0 and leaves an exception set on a bad value. */
static int to_ptr(PyObject* o, void** out) {
  if (o == Py_None) {
    *out = NULL;
    return 1;
  }
  *out = PyLong_AsVoidPtr(o);
  return !(*out == NULL && PyErr_Occurred());
}

static int to_i64(PyObject* o, int64_t* out) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) return 0;
  *out = (int64_t)v;
  return 1;
}

static int to_int(PyObject* o, int* out) {
  const long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return 0;
  if (v < INT32_MIN || v > INT32_MAX) {
    PyErr_SetString(PyExc_OverflowError, "jitune._fast: an int argument is out of range");
    return 0;
  }
  *out = (int)v;
  return 1;
}

static int to_float(PyObject* o, float* out) {
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) return 0;
  *out = (float)v;
  return 1;
}

/* A tuple of at most `max` Python ints into out[]; *count is its length. */
static int to_i64_tuple(PyObject* o, int64_t* out, Py_ssize_t max, Py_ssize_t* count) {
  if (!PyTuple_Check(o)) {
    PyErr_SetString(PyExc_TypeError, "jitune._fast: expected a tuple of ints");
    return 0;
  }
  const Py_ssize_t n = PyTuple_Size(o);
  if (n > max) {
    PyErr_Format(PyExc_ValueError, "jitune._fast: %zd entries, at most %zd", n, max);
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!to_i64(PyTuple_GetItem(o, i), &out[i])) return 0;
  *count = n;
  return 1;
}

static int arity(const char* name, Py_ssize_t nargs, Py_ssize_t want) {
  if (nargs == want) return 1;
  PyErr_Format(PyExc_TypeError, "jitune._fast.%s takes %zd arguments (%zd given)", name, want, nargs);
  return 0;
}

static int bound(void* fn, const char* name) {
  if (fn) return 1;
  PyErr_Format(PyExc_RuntimeError, "jitune._fast.%s: bind() has not been called", name);
  return 0;
}

/* elementwise(rt, expression: bytes, output, n, dtype, stream, *inputs) */
static PyObject* fast_elementwise(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *out, *stream;
  void* inputs[kMaxInputs];
  int64_t n;
  int dtype;
  if (!bound((void*)p_elementwise, "elementwise")) return NULL;
  if (nargs < 7 || nargs > 6 + kMaxInputs) {
    PyErr_Format(PyExc_TypeError, "jitune._fast.elementwise takes 6 arguments and 1 to %d inputs (%zd given)",
                 kMaxInputs, nargs);
    return NULL;
  }
  const char* expression = PyBytes_AsString(args[1]);
  if (!expression || !to_ptr(args[0], &rt) || !to_ptr(args[2], &out) || !to_i64(args[3], &n) ||
      !to_int(args[4], &dtype) || !to_ptr(args[5], &stream))
    return NULL;
  const Py_ssize_t k = nargs - 6;
  for (Py_ssize_t i = 0; i < k; ++i)
    if (!to_ptr(args[6 + i], &inputs[i])) return NULL;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_elementwise((jitune_runtime*)rt, expression, (const void* const*)inputs, (size_t)k, out, n,
                         (jitune_dtype)dtype, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* permute(rt, src, dst, shape: tuple, perm: tuple, dtype, stream) */
static PyObject* fast_permute(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *src, *dst, *stream;
  int64_t shape[kMaxDims], perm64[kMaxDims];
  int32_t perm[kMaxDims];
  Py_ssize_t dims = 0, perm_dims = 0;
  int dtype;
  if (!bound((void*)p_permute, "permute") || !arity("permute", nargs, 7)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &src) || !to_ptr(args[2], &dst) ||
      !to_i64_tuple(args[3], shape, kMaxDims, &dims) || !to_i64_tuple(args[4], perm64, kMaxDims, &perm_dims) ||
      !to_int(args[5], &dtype) || !to_ptr(args[6], &stream))
    return NULL;
  if (perm_dims != dims) {
    PyErr_SetString(PyExc_ValueError, "jitune._fast.permute: shape and perm differ in length");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < dims; ++i) perm[i] = (int32_t)perm64[i];  /* libjitune checks the values */
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_permute((jitune_runtime*)rt, src, dst, shape, perm, (size_t)dims, (jitune_dtype)dtype, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* index_add(rt, dst, dst_rows, index, index_count, index_dtype, src, src_rows, row_length, dtype, alpha,
 *           check_indices, stream) */
static PyObject* fast_index_add(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *dst, *index, *src, *stream;
  int64_t dst_rows, count, src_rows, row_length;
  int index_dtype, dtype, check;
  float alpha;
  if (!bound((void*)p_index_add, "index_add") || !arity("index_add", nargs, 13)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &dst) || !to_i64(args[2], &dst_rows) || !to_ptr(args[3], &index) ||
      !to_i64(args[4], &count) || !to_int(args[5], &index_dtype) || !to_ptr(args[6], &src) ||
      !to_i64(args[7], &src_rows) || !to_i64(args[8], &row_length) || !to_int(args[9], &dtype) ||
      !to_float(args[10], &alpha) || !to_int(args[11], &check) || !to_ptr(args[12], &stream))
    return NULL;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_index_add((jitune_runtime*)rt, dst, dst_rows, index, count, (jitune_dtype)index_dtype, src, src_rows,
                       row_length, (jitune_dtype)dtype, alpha, check, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* scatter_add(rt, dst, dst_count, index, index_count, index_dtype, src, src_count, dtype, alpha, check_indices,
 *             stream) */
static PyObject* fast_scatter_add(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *dst, *index, *src, *stream;
  int64_t dst_count, count, src_count;
  int index_dtype, dtype, check;
  float alpha;
  if (!bound((void*)p_scatter_add, "scatter_add") || !arity("scatter_add", nargs, 12)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &dst) || !to_i64(args[2], &dst_count) ||
      !to_ptr(args[3], &index) || !to_i64(args[4], &count) || !to_int(args[5], &index_dtype) ||
      !to_ptr(args[6], &src) || !to_i64(args[7], &src_count) || !to_int(args[8], &dtype) ||
      !to_float(args[9], &alpha) || !to_int(args[10], &check) || !to_ptr(args[11], &stream))
    return NULL;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_scatter_add((jitune_runtime*)rt, dst, dst_count, index, count, (jitune_dtype)index_dtype, src,
                         src_count, (jitune_dtype)dtype, alpha, check, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* dot(rt, x, y, n, out, dtype, stream) */
static PyObject* fast_dot(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *x, *y, *out, *stream;
  int64_t n;
  int dtype;
  if (!bound((void*)p_dot, "dot") || !arity("dot", nargs, 7)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &x) || !to_ptr(args[2], &y) || !to_i64(args[3], &n) ||
      !to_ptr(args[4], &out) || !to_int(args[5], &dtype) || !to_ptr(args[6], &stream))
    return NULL;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_dot((jitune_runtime*)rt, x, y, n, out, (jitune_dtype)dtype, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* reduce_rows(rt, x, y, rows, cols, op, dtype, stream) */
static PyObject* fast_reduce_rows(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *x, *y, *stream;
  int64_t rows, cols;
  int op, dtype;
  if (!bound((void*)p_reduce_rows, "reduce_rows") || !arity("reduce_rows", nargs, 8)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &x) || !to_ptr(args[2], &y) || !to_i64(args[3], &rows) ||
      !to_i64(args[4], &cols) || !to_int(args[5], &op) || !to_int(args[6], &dtype) || !to_ptr(args[7], &stream))
    return NULL;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = p_reduce_rows((jitune_runtime*)rt, x, y, rows, cols, (jitune_reduce_op)op, (jitune_dtype)dtype, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* upsample_nearest2d(rt, shape, input, output, stream, backward): shape is the address of a
 * jitune_upsample_nearest2d_shape the caller keeps alive (jitune.torch caches one per problem); backward (0 / 1)
 * picks jitune_upsample_nearest2d_backward (input = grad_output, output = grad_input). */
static PyObject* fast_upsample(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void *rt, *shape, *in, *out, *stream;
  int backward;
  if (!bound((void*)p_upsample, "upsample_nearest2d") || !arity("upsample_nearest2d", nargs, 6)) return NULL;
  if (!to_ptr(args[0], &rt) || !to_ptr(args[1], &shape) || !to_ptr(args[2], &in) || !to_ptr(args[3], &out) ||
      !to_ptr(args[4], &stream) || !to_int(args[5], &backward))
    return NULL;
  const jitune_upsample_nearest2d_shape* s = (const jitune_upsample_nearest2d_shape*)shape;
  jitune_status status;
  Py_BEGIN_ALLOW_THREADS
  status = backward ? p_upsample_backward((jitune_runtime*)rt, s, in, out, stream)
                    : p_upsample((jitune_runtime*)rt, s, in, out, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

enum { kBound = 8 };

/* bind(elementwise, permute, index_add, scatter_add, dot, reduce_rows, upsample_nearest2d,
 *      upsample_nearest2d_backward): the functions' addresses (ints). */
static PyObject* fast_bind(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  void* fn[kBound];
  if (!arity("bind", nargs, kBound)) return NULL;
  for (int i = 0; i < kBound; ++i) {
    if (!to_ptr(args[i], &fn[i])) return NULL;
    if (!fn[i]) {
      PyErr_SetString(PyExc_ValueError, "jitune._fast.bind: a function address is NULL");
      return NULL;
    }
  }
  p_elementwise = (__typeof__(p_elementwise))fn[0];
  p_permute = (__typeof__(p_permute))fn[1];
  p_index_add = (__typeof__(p_index_add))fn[2];
  p_scatter_add = (__typeof__(p_scatter_add))fn[3];
  p_dot = (__typeof__(p_dot))fn[4];
  p_reduce_rows = (__typeof__(p_reduce_rows))fn[5];
  p_upsample = (__typeof__(p_upsample))fn[6];
  p_upsample_backward = (__typeof__(p_upsample_backward))fn[7];
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))fast_bind, METH_FASTCALL, "bind(elementwise, permute, ...): addresses"},
    {"elementwise", (PyCFunction)(void (*)(void))fast_elementwise, METH_FASTCALL, "jitune_elementwise"},
    {"permute", (PyCFunction)(void (*)(void))fast_permute, METH_FASTCALL, "jitune_permute"},
    {"index_add", (PyCFunction)(void (*)(void))fast_index_add, METH_FASTCALL, "jitune_index_add"},
    {"scatter_add", (PyCFunction)(void (*)(void))fast_scatter_add, METH_FASTCALL, "jitune_scatter_add"},
    {"dot", (PyCFunction)(void (*)(void))fast_dot, METH_FASTCALL, "jitune_dot"},
    {"reduce_rows", (PyCFunction)(void (*)(void))fast_reduce_rows, METH_FASTCALL, "jitune_reduce_rows"},
    {"upsample_nearest2d", (PyCFunction)(void (*)(void))fast_upsample, METH_FASTCALL,
     "jitune_upsample_nearest2d / _backward"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast", "jitune's hot op calls without ctypes (see fast.c)", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
