/* A first program against an installed jitune (the C ABI, jitune/jitune.h, linked as jitune::shared): open a
 * runtime on device 0, print the device, and ask which tuned configuration an elementwise problem would use and
 * why. It needs no GPU memory of its own. Without a GPU it prints the reason and exits 3, as the jitune CLI does. */
#include <jitune/jitune.h>

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  jitune_runtime* runtime = NULL;
  jitune_status status = jitune_runtime_create(NULL, &runtime);
  if (status == JITUNE_ERROR_NO_DEVICE) {
    fprintf(stderr, "jitune_example: no GPU: %s\n", jitune_last_error());
    return 3;
  }
  if (status != JITUNE_OK) {
    fprintf(stderr, "jitune_example: %s: %s\n", jitune_status_name(status), jitune_last_error());
    return 1;
  }
  jitune_device_info device;
  device.struct_size = sizeof device;
  if (jitune_runtime_device(runtime, &device) == JITUNE_OK)
    printf("device %d: %s, sm_%d%d, %d SMs\n", device.ordinal, device.name, device.cc_major, device.cc_minor,
           device.sm_count);
  char signature[512];
  size_t required = 0;
  status = jitune_elementwise_signature("z = x * y", 1 << 24, JITUNE_FLOAT16, signature, sizeof signature, &required);
  if (status == JITUNE_OK) {
    char* why = NULL;
    status = jitune_explain(runtime, "elementwise", signature, NULL, 0, &required);
    if (status == JITUNE_ERROR_BUFFER_TOO_SMALL && (why = malloc(required)) != NULL) {
      status = jitune_explain(runtime, "elementwise", signature, why, required, &required);
      if (status == JITUNE_OK) printf("elementwise %s:\n%s\n", signature, why);
      free(why);
    }
  }
  if (status != JITUNE_OK) fprintf(stderr, "jitune_example: %s: %s\n", jitune_status_name(status), jitune_last_error());
  jitune_runtime_destroy(runtime);
  return status == JITUNE_OK ? 0 : 1;
}
