/* The spec's MemRefDescriptor<T, N> (spec 002, "C-compatible wrapper
 * emission") instantiated in C for T = float and N = 0..4, and the unranked
 * descriptor {rank, pointer}. Compiled by tests/layout.rs with clang-19; the
 * exported functions report C's layout and read descriptors the way compiled
 * code does, so the Rust side can compare. */
#include <stddef.h>
#include <stdint.h>

/* Rank 0 has no arrays: {T*, T*, i64}, as MLIR's rank-0 descriptor. */
typedef struct { float *allocated; float *aligned; intptr_t offset; } desc0;
#define DESC(N)                                                               \
  typedef struct {                                                            \
    float *allocated;                                                         \
    float *aligned;                                                           \
    intptr_t offset;                                                          \
    intptr_t sizes[N];                                                        \
    intptr_t strides[N];                                                      \
  } desc##N;
DESC(1)
DESC(2)
DESC(3)
DESC(4)

typedef struct { int64_t rank; void *descriptor; } unranked;

#define COMMON(N)                                                             \
  size_t locus_sizeof_##N(void) { return sizeof(desc##N); }                   \
  size_t locus_alignof_##N(void) { return _Alignof(desc##N); }

#define OFFSETS(N)                                                            \
  size_t locus_offsetof_##N(int f) {                                          \
    switch (f) {                                                              \
    case 0: return offsetof(desc##N, allocated);                              \
    case 1: return offsetof(desc##N, aligned);                                \
    case 2: return offsetof(desc##N, offset);                                 \
    case 3: return offsetof(desc##N, sizes);                                  \
    case 4: return offsetof(desc##N, strides);                                \
    }                                                                         \
    return (size_t)-1;                                                        \
  }                                                                           \
  /* Field f (index i for sizes/strides) of a descriptor passed by pointer. */ \
  int64_t locus_field_##N(const desc##N *d, int f, int i) {                   \
    switch (f) {                                                              \
    case 0: return (int64_t)(intptr_t)d->allocated;                           \
    case 1: return (int64_t)(intptr_t)d->aligned;                             \
    case 2: return d->offset;                                                 \
    case 3: return d->sizes[i];                                               \
    case 4: return d->strides[i];                                             \
    }                                                                         \
    return -1;                                                                \
  }                                                                           \
  /* Load as lowered code does: aligned[offset + sum(idx_k * strides[k])]. */ \
  float locus_load_##N(const desc##N *d, const int64_t *idx) {                \
    intptr_t lin = d->offset;                                                 \
    for (int k = 0; k < N; k++) lin += idx[k] * d->strides[k];                \
    return d->aligned[lin];                                                   \
  }                                                                           \
  /* Write a descriptor through a pointer, as a ciface result parameter. */   \
  void locus_fill_##N(desc##N *out, float *base) {                            \
    out->allocated = base;                                                    \
    out->aligned = base + 1;                                                  \
    out->offset = N + 2;                                                      \
    for (int k = 0; k < N; k++) {                                             \
      out->sizes[k] = 10 * k + 1;                                             \
      out->strides[k] = -(k + 3);                                             \
    }                                                                         \
  }

COMMON(0)
size_t locus_offsetof_0(int f) {
  switch (f) {
  case 0: return offsetof(desc0, allocated);
  case 1: return offsetof(desc0, aligned);
  case 2: return offsetof(desc0, offset);
  }
  return (size_t)-1;
}
int64_t locus_field_0(const desc0 *d, int f, int i) {
  (void)i;
  switch (f) {
  case 0: return (int64_t)(intptr_t)d->allocated;
  case 1: return (int64_t)(intptr_t)d->aligned;
  case 2: return d->offset;
  }
  return -1;
}
float locus_load_0(const desc0 *d, const int64_t *idx) {
  (void)idx;
  return d->aligned[d->offset];
}
void locus_fill_0(desc0 *out, float *base) {
  out->allocated = base;
  out->aligned = base + 1;
  out->offset = 2;
}

COMMON(1) OFFSETS(1)
COMMON(2) OFFSETS(2)
COMMON(3) OFFSETS(3)
COMMON(4) OFFSETS(4)

size_t locus_sizeof_unranked(void) { return sizeof(unranked); }
size_t locus_alignof_unranked(void) { return _Alignof(unranked); }
size_t locus_offsetof_unranked(int f) {
  return f == 0 ? offsetof(unranked, rank) : offsetof(unranked, descriptor);
}
/* Reads an unranked rank-2 memref: rank, then an element through the pointer. */
int64_t locus_unranked_rank(const unranked *u) { return u->rank; }
float locus_unranked_load_2(const unranked *u, const int64_t *idx) {
  return locus_load_2((const desc2 *)u->descriptor, idx);
}
