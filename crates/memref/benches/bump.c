/* The benchmark's C baseline: the body of fixtures/bench.mlir's @bump on the
 * descriptor of spec 002's MemRefDescriptor<float, 1>. */
#include <stdint.h>

struct MemRef1 {
  float *allocated;
  float *aligned;
  intptr_t offset;
  intptr_t sizes[1];
  intptr_t strides[1];
};

void bump_c(struct MemRef1 *a) { a->aligned[a->offset] += 1.0f; }
