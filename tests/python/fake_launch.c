/* A stand-in for kjit_kernel_launch_packed that records each packed launch, so that the Python
 * package's launch paths (ctypes, and kjit._fastlaunch's C) are checked without a GPU against one
 * and the same C function. */
#include <stddef.h>
#include <string.h>

enum { MAX_CALLS = 64, MAX_BYTES = 1024 };
static unsigned char recorded[MAX_CALLS][MAX_BYTES];
static size_t packed_size;
static int calls;

void kjit_test_launch_reset(size_t size) {
  packed_size = size < MAX_BYTES ? size : MAX_BYTES;
  calls = 0;
}
int kjit_test_launch_count(void) { return calls; }
const unsigned char *kjit_test_launch_recorded(int index) { return recorded[index]; }

/* Status 13 (KJIT_BAD_ARGUMENT) once MAX_CALLS are recorded; 0 otherwise. */
int kjit_test_launch(const void *kernel, const void *packed) {
  (void)kernel;
  if (calls == MAX_CALLS)
    return 13;
  memcpy(recorded[calls++], packed, packed_size);
  return 0;
}
