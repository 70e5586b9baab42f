/* The C part of the C ABI's host test (capi_c.c), called from capi_test.cpp. */
#ifndef JITUNE_TESTS_CAPI_C_H
#define JITUNE_TESTS_CAPI_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The structs of jitune.h, by number. */
enum {
  CAPI_C_RUNTIME_OPTIONS,
  CAPI_C_DEVICE_INFO,
  CAPI_C_UPSAMPLE_SHAPE,
  CAPI_C_CONV2D_PARAMS,
  CAPI_C_TUNE_RESULT,
  CAPI_C_IMPORT_REPORT,
  CAPI_C_STRUCTS
};

/* sizeof and the offset of the last member of struct `which`, as a C compiler lays it out. */
size_t capi_c_sizeof(int which);
size_t capi_c_offsetof_last(int which);

/* Calls the C ABI from C; 0 when every check passed, else 1 with the first failure described in `failure`.
 * Writes the signature of a float16 dot over 1000 elements and the output shape of a 2x3x17x19 conv2d
 * (5x3x3x3 weight, stride 2x1, padding 1x0, dilation 1x2). */
int capi_c_run(char* failure, size_t failure_size, char* dot_signature, size_t dot_signature_size,
               int64_t* conv2d_output);

#ifdef __cplusplus
}
#endif

#endif
