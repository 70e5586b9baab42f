/* A C99 user of the C ABI (compiled with -std=c99 -pedantic-errors -Werror): proves that <jitune/jitune.h> is
 * C, and reports the struct layouts C sees and the results of a few calls to capi_test.cpp, which checks
 * them. */
#include <jitune/jitune.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_c.h"

size_t capi_c_sizeof(int which) {
  switch (which) {
    case CAPI_C_RUNTIME_OPTIONS:
      return sizeof(jitune_runtime_options);
    case CAPI_C_DEVICE_INFO:
      return sizeof(jitune_device_info);
    case CAPI_C_UPSAMPLE_SHAPE:
      return sizeof(jitune_upsample_nearest2d_shape);
    case CAPI_C_CONV2D_PARAMS:
      return sizeof(jitune_conv2d_params);
    case CAPI_C_TUNE_RESULT:
      return sizeof(jitune_tune_result);
    case CAPI_C_IMPORT_REPORT:
      return sizeof(jitune_import_report);
    default:
      return 0;
  }
}

size_t capi_c_offsetof_last(int which) {
  switch (which) {
    case CAPI_C_RUNTIME_OPTIONS:
      return offsetof(jitune_runtime_options, tune_min_time_ms);
    case CAPI_C_DEVICE_INFO:
      return offsetof(jitune_device_info, memory_clock_mhz);
    case CAPI_C_UPSAMPLE_SHAPE:
      return offsetof(jitune_upsample_nearest2d_shape, dtype);
    case CAPI_C_CONV2D_PARAMS:
      return offsetof(jitune_conv2d_params, dilation);
    case CAPI_C_TUNE_RESULT:
      return offsetof(jitune_tune_result, heuristic_config);
    case CAPI_C_IMPORT_REPORT:
      return offsetof(jitune_import_report, rejected);
    default:
      return 0;
  }
}

/* Records the first failed check in `failure` and returns 1. */
static int failed(char* failure, size_t size, const char* what, jitune_status status) {
  snprintf(failure, size, "%s: %s (%s)", what, jitune_status_name(status), jitune_last_error());
  return 1;
}

int capi_c_run(char* failure, size_t failure_size, char* dot_signature, size_t dot_signature_size,
               int64_t* conv2d_output) {
  jitune_runtime_options options;
  jitune_runtime* runtime = NULL;
  jitune_conv2d_params params;
  jitune_status status;
  size_t required = 0;
  char* text;
  int count = -1;

  if (strcmp(jitune_status_name(JITUNE_ERROR_COMPILE), "JITUNE_ERROR_COMPILE") != 0)
    return failed(failure, failure_size, "jitune_status_name", JITUNE_OK);
  status = jitune_device_count(&count);
  if (status != JITUNE_OK || count < 0) return failed(failure, failure_size, "jitune_device_count", status);

  /* A runtime from zeroed options: on a machine without a GPU, NO_DEVICE with a reason and no handle. */
  memset(&options, 0, sizeof options);
  options.struct_size = sizeof options;
  options.disable_user_cache = 1;
  options.disable_builtin_shipped_caches = 1;
  options.quiet = 1;
  status = jitune_runtime_create(&options, &runtime);
  if (status == JITUNE_OK) {
    status = jitune_runtime_destroy(runtime);
    if (status != JITUNE_OK) return failed(failure, failure_size, "jitune_runtime_destroy", status);
  } else if (status != JITUNE_ERROR_NO_DEVICE || runtime != NULL || jitune_last_error()[0] == '\0' ||
             count != 0) {
    return failed(failure, failure_size, "jitune_runtime_create", status);
  }

  /* Text out: ask for the size, then fetch into a buffer of exactly that size. */
  status = jitune_dot_signature(1000, JITUNE_FLOAT16, NULL, 0, &required);
  if (status != JITUNE_ERROR_BUFFER_TOO_SMALL || required < 2)
    return failed(failure, failure_size, "jitune_dot_signature (size query)", status);
  text = (char*)malloc(required);
  if (!text) return failed(failure, failure_size, "malloc", JITUNE_ERROR_OUT_OF_MEMORY);
  status = jitune_dot_signature(1000, JITUNE_FLOAT16, text, required, &required);
  if (status != JITUNE_OK || strlen(text) + 1 != required || required > dot_signature_size) {
    free(text);
    return failed(failure, failure_size, "jitune_dot_signature", status);
  }
  memcpy(dot_signature, text, required);
  free(text);

  /* A caller-owned struct with C99 designated initialisers. */
  {
    jitune_conv2d_params p = {.struct_size = sizeof(jitune_conv2d_params),
                              .input = {2, 3, 17, 19},
                              .weight = {5, 3, 3, 3},
                              .stride = {2, 1},
                              .padding = {1, 0},
                              .dilation = {1, 2}};
    params = p;
  }
  status = jitune_conv2d_output_shape(&params, conv2d_output);
  if (status != JITUNE_OK) return failed(failure, failure_size, "jitune_conv2d_output_shape", status);
  return 0;
}
