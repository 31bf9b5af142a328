/* Every entry point of include/locus_gc.h, called from C as a host or a program does: the
 * status codes of the attach API, and each bad input one case of its own (argv[1]), which
 * must end with one `locus:` line and the documented exit status, never a silent crash.
 * tests/c_api.rs builds it against the static library and runs every case. */
#include "locus_gc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #cond); \
      return 1;                                                      \
    }                                                                \
  } while (0)

static uint8_t *table[4];

/* The attach API's codes and every entry point that returns one, on good input. */
static int statuses(void) {
  CHECK(locus_gc_thread_detach() == 2);
  CHECK(locus_gc_init() == 0);
  CHECK(locus_gc_init() == 1);
  CHECK(locus_gc_thread_attach() == 1);
  CHECK(locus_gc_heap() != NULL);
  CHECK(locus_gc_thread_attach_heap(locus_gc_heap()) == 1);

  /* A frame of one root, linked and unlinked as lowered code does. */
  void *frame[3] = {(void *)(uintptr_t)(1 << 2), 0, 0};
  GcFrame **head = locus_gc_get_pgcstack();
  CHECK(head != NULL);
  frame[1] = *head;
  *head = (GcFrame *)frame;
  uint8_t *obj = locus_gc_alloc(1, 8);
  CHECK(obj != NULL);
  frame[2] = obj;
  memcpy(obj + 8, &(int64_t){42}, 8);
  locus_gc_safepoint();
  locus_gc_poll();
  CHECK(locus_gc_foreign_read(obj, 8) == 42);
  CHECK(locus_gc_callee_rooted_read(obj, 8) == 42);
  locus_gc_write_barrier(obj);
  locus_gc_pin(obj);
  locus_gc_unpin(obj);
  locus_gc_pin(NULL); /* no object there: ignored */
  locus_gc_unpin(NULL);

  uint8_t *tagged = locus_gc_alloc_bytes(NULL, 24, 7);
  CHECK(tagged != NULL);
  uint8_t *mem = locus_gc_alloc_genericmemory(NULL, 16, tagged);
  CHECK(mem != NULL);

  table[0] = obj;
  locus_gc_add_root_region((uint8_t *)table, (uint8_t *)(table + 4));
  locus_gc_safepoint();
  CHECK(locus_gc_remove_root_region((uint8_t *)table) == 1);
  CHECK(locus_gc_remove_root_region((uint8_t *)table) == 0);

  int64_t depth = locus_gc_region_depth();
  uint8_t *words[2] = {obj, 0};
  locus_gc_push_region((uint8_t *)words, (uint8_t *)(words + 2));
  CHECK(locus_gc_region_depth() == depth + 1);
  locus_gc_region_reset(depth);
  CHECK(locus_gc_region_depth() == depth);

  locus_gc_enter_safe_region();
  locus_gc_leave_safe_region();

  *head = (GcFrame *)frame[1];
  CHECK(locus_gc_thread_detach() == 0);
  CHECK(locus_gc_thread_detach() == 2);
  CHECK(locus_gc_thread_attach() == 0);
  CHECK(locus_gc_thread_detach() == 0);
  printf("ok\n");
  return 0;
}

static int64_t forty_two(void) { return 42; }

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "statuses";
  if (!strcmp(c, "statuses")) return statuses();
  if (!strcmp(c, "main")) return locus_gc_main(forty_two);
  if (!strcmp(c, "main-null")) return locus_gc_main(NULL);
  if (!strcmp(c, "main-with-collector")) return locus_gc_main_with_collector(forty_two, "mmtk:marksweep");
  if (!strcmp(c, "main-with-unknown-collector")) return locus_gc_main_with_collector(forty_two, "nope");
  if (!strcmp(c, "no-runtime")) { locus_gc_alloc(1, 8); return 0; }
  if (!strcmp(c, "no-runtime-safepoint")) { locus_gc_safepoint(); return 0; }
  if (!strcmp(c, "attach-heap-null")) return locus_gc_thread_attach_heap(NULL);
  if (!strcmp(c, "statepoints-without-stack-maps")) return locus_gc_init_statepoints();
  if (!strcmp(c, "main-statepoints-without-stack-maps")) return locus_gc_main_statepoints(forty_two);
  CHECK(locus_gc_init() == 0);
  if (!strcmp(c, "negative-size")) { locus_gc_alloc(-1, 0); return 0; }
  if (!strcmp(c, "huge-size")) { locus_gc_alloc(0, INT64_MAX); return 0; }
  if (!strcmp(c, "negative-bytes")) { locus_gc_alloc_bytes(NULL, -8, 0); return 0; }
  if (!strcmp(c, "negative-memory")) { locus_gc_alloc_genericmemory(NULL, -8, NULL); return 0; }
  if (!strcmp(c, "read-null")) { printf("%lld\n", (long long)locus_gc_foreign_read(NULL, 0)); return 0; }
  if (!strcmp(c, "read-outside")) {
    uint8_t *o = locus_gc_alloc(0, 8);
    printf("%lld\n", (long long)locus_gc_foreign_read(o, 4096));
    return 0;
  }
  if (!strcmp(c, "callee-rooted-null")) { printf("%lld\n", (long long)locus_gc_callee_rooted_read(NULL, 0)); return 0; }
  if (!strcmp(c, "root-region-garbage")) {
    table[1] = (uint8_t *)(uintptr_t)0x1234;
    locus_gc_add_root_region((uint8_t *)table, (uint8_t *)(table + 4));
    locus_gc_safepoint(); /* LOCUS_GC_STRESS=1: a collection reads the table */
    return 0;
  }
  if (!strcmp(c, "root-region-reversed")) {
    locus_gc_add_root_region((uint8_t *)(table + 4), (uint8_t *)table);
    locus_gc_safepoint();
    printf("ok\n");
    return 0;
  }
  if (!strcmp(c, "push-region-reversed")) {
    uint8_t *w[2] = {0, 0};
    locus_gc_push_region((uint8_t *)(w + 2), (uint8_t *)w);
    locus_gc_safepoint();
    printf("ok\n");
    return 0;
  }
  if (!strcmp(c, "region-reset-above-depth")) {
    locus_gc_region_reset(1000);
    printf("%lld\n", (long long)locus_gc_region_depth());
    return 0;
  }
  if (!strcmp(c, "region-reset-negative")) {
    locus_gc_region_reset(-1);
    printf("%lld\n", (long long)locus_gc_region_depth());
    return 0;
  }
  if (!strcmp(c, "bad-frame")) {
    void *frame[3] = {(void *)(uintptr_t)((1 << 2) | 3), 0, 0}; /* flag bits set */
    GcFrame **head = locus_gc_get_pgcstack();
    frame[1] = *head;
    *head = (GcFrame *)frame;
    locus_gc_safepoint();
    return 0;
  }
  if (!strcmp(c, "dangling-root")) {
    void *frame[3] = {(void *)(uintptr_t)(1 << 2), 0, 0};
    GcFrame **head = locus_gc_get_pgcstack();
    frame[1] = *head;
    *head = (GcFrame *)frame;
    uint8_t *o = locus_gc_alloc(0, 8);
    locus_gc_safepoint(); /* unrooted: freed */
    frame[2] = o;         /* a freed object in a root */
    locus_gc_safepoint();
    return 0;
  }
  if (!strcmp(c, "write-barrier-null")) { locus_gc_write_barrier(NULL); printf("ok\n"); return 0; }
  if (!strcmp(c, "pinned-is-a-root")) {
    /* In no frame, only pinned: it survives collections until unpinned. */
    uint8_t *o = locus_gc_alloc(0, 8);
    memcpy(o, &(int64_t){9}, 8);
    locus_gc_pin(o);
    locus_gc_safepoint();
    locus_gc_safepoint();
    int64_t v = locus_gc_foreign_read(o, 0);
    locus_gc_unpin(o);
    printf("%lld\n", (long long)v);
    return 0;
  }
  if (!strcmp(c, "statepoint-calls")) {
    /* The statepoint wrappers' entry points on a runtime without stack maps: a C caller
     * has no GC pointers in its frames, so each works as its plain counterpart. */
    size_t fp = (size_t)__builtin_frame_address(0);
    void *frame[3] = {(void *)(uintptr_t)(1 << 2), 0, 0};
    GcFrame **head = locus_gc_get_pgcstack();
    frame[1] = *head;
    *head = (GcFrame *)frame;
    uint8_t *o = locus_gc_sp_alloc(0, 8, fp);
    frame[2] = o;
    memcpy(o, &(int64_t){7}, 8);
    locus_gc_pin(o);
    uint8_t *t = locus_gc_sp_alloc_bytes(NULL, 16, 3, fp);
    uint8_t *m = locus_gc_sp_alloc_genericmemory(NULL, 8, t, fp);
    locus_gc_sp_safepoint(fp);
    locus_gc_sp_poll(fp);
    int64_t a = locus_gc_sp_foreign_read(o, 0, fp);
    int64_t b = locus_gc_sp_callee_rooted_read(o, 0, fp);
    locus_gc_unpin(o);
    locus_gc_pin_forever(m);
    printf("%lld %lld\n", (long long)a, (long long)b);
    return 0;
  }
  fprintf(stderr, "no case %s\n", c);
  return 64;
}
