/* Live values through the C API (x86-64 Linux): fixtures/live.ll's @run, compiled by llc-19
 * and linked into this program (-no-pie), calls `capture` twice, through a gc.statepoint
 * (ID 100) and through a plain call followed by a stack map (ID 200). `capture` is a small
 * assembly trampoline that snapshots what a runtime stopped at that call knows (the return
 * address, the caller's stack pointer, the callee-saved registers) and hands it to
 * inspect(), which finds the record by return address in an index built from this very
 * executable (/proc/self/exe) and reads every value through the C API, from a register
 * callback or array and the caller's live stack. The values must be the ones @run was
 * given. Run by tests/c.rs; prints "live_test: N values checked, F failed". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "locus.h"

/* What `capture` saves at its entry. Layout shared with the assembly below. */
typedef struct {
    uint64_t return_address; /* [rsp] at entry */
    uint64_t sp;             /* rsp + 8 at entry: the caller's stack pointer (DWARF 7) */
    uint64_t rbx, rbp, r12, r13, r14, r15;
} Snapshot;

/* @run reads in[0..10] with volatile loads; the rest is this program's. */
typedef struct {
    int64_t in[10];
    LocusIndex *index;
    int64_t a, b;
    uint64_t p, q;
    int stops, values, failures;
} Ctx;

void run(Ctx *ctx, void (*callback)(Ctx *), int64_t a, int64_t b, uint64_t p, uint64_t q);
void capture(Ctx *ctx);
void inspect(Ctx *ctx, const Snapshot *s);

__asm__(".text\n"
        ".globl capture\n"
        ".type capture, @function\n"
        "capture:\n"
        "  sub $72, %rsp\n" /* the snapshot (64 bytes) + 8: keeps the call aligned */
        "  mov 72(%rsp), %rax\n"
        "  mov %rax, 0(%rsp)\n"
        "  lea 80(%rsp), %rax\n"
        "  mov %rax, 8(%rsp)\n"
        "  mov %rbx, 16(%rsp)\n"
        "  mov %rbp, 24(%rsp)\n"
        "  mov %r12, 32(%rsp)\n"
        "  mov %r13, 40(%rsp)\n"
        "  mov %r14, 48(%rsp)\n"
        "  mov %r15, 56(%rsp)\n"
        "  mov %rsp, %rsi\n" /* rdi still holds ctx */
        "  call inspect\n"
        "  add $72, %rsp\n"
        "  ret\n"
        ".size capture, .-capture\n");

#define EXPECT_EQ(ctx, got, want, what)                                                    \
    do {                                                                                   \
        (ctx)->values++;                                                                   \
        if ((uint64_t)(got) != (uint64_t)(want)) {                                         \
            (ctx)->failures++;                                                             \
            fprintf(stderr, "%s: got %#" PRIx64 ", expected %#" PRIx64 "\n", what,         \
                    (uint64_t)(got), (uint64_t)(want));                                    \
        }                                                                                  \
    } while (0)

static void fail(Ctx *ctx, const char *what, const LocusError *err) {
    ctx->failures++;
    fprintf(stderr, "%s: %s: %s\n", what, locus_status_name(err->code), err->message);
}

/* Registers the snapshot knows: the callee-saved ones and the stack pointer. */
static bool snapshot_register(void *context, uint16_t reg, uint64_t *value) {
    const Snapshot *s = context;
    switch (reg) {
    case 3: *value = s->rbx; return true;
    case 6: *value = s->rbp; return true;
    case 7: *value = s->sp; return true;
    case 12: *value = s->r12; return true;
    case 13: *value = s->r13; return true;
    case 14: *value = s->r14; return true;
    case 15: *value = s->r15; return true;
    default: return false;
    }
}

void inspect(Ctx *ctx, const Snapshot *s) {
    ctx->stops++;
    LocusError err;
    LocusRecord r;
    size_t n = 0;
    if (locus_index_lookup(ctx->index, s->return_address, &r, 1, &n, &err) != LOCUS_OK)
        return fail(ctx, "lookup", &err);
    /* The batch lookup a stack walk would use agrees. */
    LocusRecord batch;
    size_t batch_n = 0;
    if (locus_index_lookup_each(ctx->index, &s->return_address, 1, &batch, &batch_n, &err) !=
        LOCUS_OK)
        return fail(ctx, "lookup_each", &err);
    EXPECT_EQ(ctx, batch_n, n, "batch lookup count");
    EXPECT_EQ(ctx, batch.number, r.number, "batch lookup record");
    if (n != 1) {
        ctx->failures++;
        fprintf(stderr, "%zu records at return address %#" PRIx64 "\n", n, s->return_address);
        return;
    }
    /* The same frame twice: registers by callback, and as an array by DWARF number (the
     * other registers unknown: a location in a caller-saved register would fail). */
    LocusFrame by_callback = {.context = (void *)s, .read_register = snapshot_register};

    if (r.id == 100) {
        LocusStatepoint sp;
        if (locus_record_statepoint(ctx->index, r.number, &sp, &err) != LOCUS_OK)
            return fail(ctx, "statepoint", &err);
        EXPECT_EQ(ctx, sp.num_deopt, 5, "deopt count");
        EXPECT_EQ(ctx, sp.num_gc_pointers, 2, "gc pointer count");
        const uint64_t deopt[5] = {(uint64_t)ctx->a, (uint64_t)(ctx->a * ctx->b), 7,
                                   (uint64_t)-3, 0x123456789abcdefull};
        for (uint64_t i = 0; i < sp.num_deopt && i < 5; i++) {
            LocusLocation l;
            uint64_t v;
            if (locus_statepoint_deopt(ctx->index, r.number, i, &l, &err) != LOCUS_OK ||
                locus_location_value(&l, &by_callback, &v, &err) != LOCUS_OK)
                return fail(ctx, "deopt value", &err);
            EXPECT_EQ(ctx, v, deopt[i], "deopt value");
        }
        uint64_t seen_p = 0, seen_q = 0;
        for (uint64_t i = 0; i < sp.num_gc_pointers; i++) {
            LocusGcPointer pair;
            uint64_t base, derived, slot;
            if (locus_statepoint_gc_pointer(ctx->index, r.number, i, &pair, &err) != LOCUS_OK ||
                locus_location_value(&pair.base, &by_callback, &base, &err) != LOCUS_OK ||
                locus_location_value(&pair.derived, &by_callback, &derived, &err) != LOCUS_OK)
                return fail(ctx, "gc pointer", &err);
            EXPECT_EQ(ctx, derived, base, "derived pointer (p and q are their own bases)");
            seen_p += base == ctx->p;
            seen_q += base == ctx->q;
            /* A collector would update the slot in place: its address holds the value. */
            if (pair.base.kind == LOCUS_LOCATION_INDIRECT) {
                if (locus_location_address(&pair.base, &by_callback, &slot, &err) != LOCUS_OK)
                    return fail(ctx, "gc pointer slot", &err);
                EXPECT_EQ(ctx, *(const uint64_t *)(uintptr_t)slot, base, "slot contents");
            }
        }
        EXPECT_EQ(ctx, seen_p, 1, "pairs whose base is p");
        EXPECT_EQ(ctx, seen_q, 1, "pairs whose base is q");
    } else if (r.id == 200) {
        const uint64_t want[14] = {
            (uint64_t)ctx->in[0], (uint64_t)ctx->in[1], (uint64_t)ctx->in[2],
            (uint64_t)ctx->in[3], (uint64_t)ctx->in[4], (uint64_t)ctx->in[5],
            (uint64_t)ctx->in[6], (uint64_t)ctx->in[7], (uint64_t)ctx->in[8],
            (uint64_t)ctx->in[9], (uint64_t)ctx->a, (uint64_t)(ctx->a * ctx->b),
            ctx->p, ctx->q};
        EXPECT_EQ(ctx, r.num_locations, 14, "stack map location count");
        uint64_t got[14];
        if (r.num_locations == 14 &&
            locus_record_values(ctx->index, r.number, &by_callback, got, 14, &err) != LOCUS_OK)
            return fail(ctx, "record values", &err);
        for (int i = 0; i < 14 && r.num_locations == 14; i++)
            EXPECT_EQ(ctx, got[i], want[i], "stack map value");
        /* The register-array frame: callee-saved registers by DWARF number. */
        uint64_t array[16] = {0};
        array[3] = s->rbx, array[6] = s->rbp, array[7] = s->sp;
        array[12] = s->r12, array[13] = s->r13, array[14] = s->r14, array[15] = s->r15;
        LocusFrame by_array = {.registers = array, .num_registers = 16};
        uint64_t again[14];
        if (r.num_locations == 14 &&
            locus_record_values(ctx->index, r.number, &by_array, again, 14, &err) != LOCUS_OK)
            return fail(ctx, "record values (array)", &err);
        for (int i = 0; i < 14 && r.num_locations == 14; i++)
            EXPECT_EQ(ctx, again[i], want[i], "stack map value (array)");
    } else {
        ctx->failures++;
        fprintf(stderr, "unexpected record ID %" PRIu64 "\n", r.id);
    }
}

int main(void) {
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f)
        return perror("/proc/self/exe"), 1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)size);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size)
        return fprintf(stderr, "cannot read /proc/self/exe\n"), 1;
    fclose(f);

    Ctx ctx = {.a = 1000003, .b = 77, .p = 0x10000, .q = 0x7fff0000};
    for (int i = 0; i < 10; i++)
        ctx.in[i] = (int64_t)0x1111111111111111ll * (i + 1) - i;
    LocusError err;
    /* A non-PIE executable: the linker wrote the functions' addresses, load bias 0. */
    if (locus_index_from_object(data, (size_t)size, 0, 0, &ctx.index, &err) != LOCUS_OK) {
        fprintf(stderr, "indexing /proc/self/exe: %s: %s\n", locus_status_name(err.code),
                err.message);
        return 1;
    }
    free(data);
    run(&ctx, capture, ctx.a, ctx.b, ctx.p, ctx.q);
    locus_index_free(ctx.index);
    if (ctx.stops != 2) {
        ctx.failures++;
        fprintf(stderr, "capture ran %d times, expected 2\n", ctx.stops);
    }
    printf("live_test: %d values checked, %d failed\n", ctx.values, ctx.failures);
    return ctx.failures ? 1 : 0;
}
