/* Every entry point of the Locus C API, with good and bad inputs. Run by tests/c.rs:
 *
 *   api_test OBJECT
 *
 * where OBJECT is fixtures/runtime.ll compiled by llc-19 for x86-64 Linux. Prints each
 * failed check, then one summary line "api_test: C checks, E error cases, F failed";
 * exits 1 if any check failed.
 *
 * The facts checked come from the inputs: the synthetic section below is built here field
 * by field, and the object's statepoint is the one fixtures/runtime.ll writes. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "locus.h"

static int checks, error_cases, failures;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) {                                                                   \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

/* Runs `call` with &err as its last argument and checks the status it returns, that
 * err.code agrees, and that an error comes with a message. */
#define EXPECT(want, call)                                                                \
    do {                                                                                  \
        LocusError err_;                                                                  \
        memset(&err_, 0x5a, sizeof err_);                                                 \
        LocusError *err = &err_;                                                          \
        LocusStatus got_ = (call);                                                        \
        checks++;                                                                         \
        if (want != LOCUS_OK)                                                             \
            error_cases++;                                                                \
        if (got_ != (want) || err_.code != got_ ||                                        \
            (got_ != LOCUS_OK && err_.message[0] == 0) ||                                 \
            (got_ == LOCUS_OK && err_.message[0] != 0)) {                                 \
            failures++;                                                                   \
            fprintf(stderr, "%s:%d: %s gave %s (err.code %d: %.200s), expected %s\n",      \
                    __FILE__, __LINE__, #call, locus_status_name(got_), err_.code,        \
                    err_.message, locus_status_name(want));                               \
        }                                                                                 \
        last_error = err_;                                                                \
    } while (0)

static LocusError last_error;

/* --- a little-endian section built field by field --------------------------------------- */

typedef struct {
    uint8_t bytes[1024];
    size_t len;
} Buf;

static void u8(Buf *b, uint8_t v) { b->bytes[b->len++] = v; }
static void u16(Buf *b, uint16_t v) { u8(b, v & 0xff), u8(b, v >> 8); }
static void u32(Buf *b, uint32_t v) { u16(b, v & 0xffff), u16(b, v >> 16); }
static void u64(Buf *b, uint64_t v) { u32(b, (uint32_t)v), u32(b, (uint32_t)(v >> 32)); }
static void location(Buf *b, uint8_t kind, uint16_t size, uint16_t reg, int32_t offset) {
    u8(b, kind), u8(b, 0), u16(b, size), u16(b, reg), u16(b, 0), u32(b, (uint32_t)offset);
}
static void align8(Buf *b) {
    while (b->len % 8)
        u8(b, 0);
}

/* Offsets of fields the damage tests change. */
static size_t at_version, at_record_count, at_num_records, at_first_kind, at_constant_index;

/* One function at 0x1000 (stack size 16) with two records and one large constant:
 *   record 0: ID 42 at +0x10: Register R#3, Indirect [R#7 + 8], Direct R#6 + -16,
 *             Constant -3 (size 4), ConstantIndex #0, Register R#3 (size 4),
 *             Indirect [R#7 + 8] (size 16); one live-out R#0 (8 bytes);
 *   record 1: ID 7 at +0x20, a statepoint: Constant 0 (cc), Constant 1 (flags),
 *             Constant 1 (one deopt), deopt Register R#3, pair Indirect [R#7 + 8] twice. */
static Buf section(uint64_t functions_record_count) {
    Buf b = {{0}, 0};
    at_version = b.len;
    u8(&b, 3), u8(&b, 0), u16(&b, 0);
    u32(&b, 1), u32(&b, 1);
    at_num_records = b.len;
    u32(&b, 2);
    u64(&b, 0x1000), u64(&b, 16);
    at_record_count = b.len;
    u64(&b, functions_record_count);
    u64(&b, 0x123456789ull);
    /* record 0 */
    u64(&b, 42), u32(&b, 0x10), u16(&b, 0), u16(&b, 7);
    at_first_kind = b.len;
    location(&b, LOCUS_LOCATION_REGISTER, 8, 3, 0);
    location(&b, LOCUS_LOCATION_INDIRECT, 8, 7, 8);
    location(&b, LOCUS_LOCATION_DIRECT, 8, 6, -16);
    location(&b, LOCUS_LOCATION_CONSTANT, 4, 0, -3);
    at_constant_index = b.len + 8;
    location(&b, LOCUS_LOCATION_CONSTANT_INDEX, 8, 0, 0);
    location(&b, LOCUS_LOCATION_REGISTER, 4, 3, 0);
    location(&b, LOCUS_LOCATION_INDIRECT, 16, 7, 8);
    align8(&b);
    u16(&b, 0), u16(&b, 1);
    u16(&b, 0), u8(&b, 0), u8(&b, 8);
    align8(&b);
    /* record 1 */
    u64(&b, 7), u32(&b, 0x20), u16(&b, 0), u16(&b, 6);
    location(&b, LOCUS_LOCATION_CONSTANT, 8, 0, 0);
    location(&b, LOCUS_LOCATION_CONSTANT, 8, 0, 1);
    location(&b, LOCUS_LOCATION_CONSTANT, 8, 0, 1);
    location(&b, LOCUS_LOCATION_REGISTER, 8, 3, 0);
    location(&b, LOCUS_LOCATION_INDIRECT, 8, 7, 8);
    location(&b, LOCUS_LOCATION_INDIRECT, 8, 7, 8);
    align8(&b);
    u16(&b, 0), u16(&b, 0);
    align8(&b);
    return b;
}

/* --- frames ------------------------------------------------------------------------------ */

typedef struct {
    uint64_t sp;       /* what R#7 reads */
    uint8_t mem[16];   /* the 16 bytes at sp + 8 */
} FakeFrame;

static bool fake_register(void *context, uint16_t reg, uint64_t *value) {
    FakeFrame *f = context;
    if (reg == 3) {
        *value = 0xabc;
        return true;
    }
    if (reg == 7) {
        *value = f->sp;
        return true;
    }
    return false;
}

static bool fake_memory(void *context, uint64_t address, uint8_t *buf, size_t len) {
    FakeFrame *f = context;
    if (address < f->sp + 8 || address + len > f->sp + 8 + sizeof f->mem)
        return false;
    memcpy(buf, f->mem + (address - f->sp - 8), len);
    return true;
}

static void test_section(void) {
    Buf b = section(2);
    LocusIndex *index = (LocusIndex *)1;

    EXPECT(LOCUS_OK, locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0x100, 0,
                                              &index, err));
    CHECK(index != NULL);

    LocusIndexInfo info;
    EXPECT(LOCUS_OK, locus_index_info(index, &info, err));
    CHECK(info.num_tables == 1 && info.num_records == 2 && info.num_indexed == 2);
    CHECK(info.load_bias == 0x100 && info.section_size == b.len);
    CHECK(info.arch == LOCUS_ARCH_UNKNOWN && !info.big_endian);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_info(NULL, &info, err));
    CHECK(strstr(last_error.message, "index") != NULL);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_info(index, NULL, err));

    LocusTable table;
    EXPECT(LOCUS_OK, locus_index_table(index, 0, &table, err));
    CHECK(table.version == 3 && table.num_functions == 1 && table.num_constants == 1);
    CHECK(table.num_records == 2 && table.first_record == 0);
    CHECK(table.section_offset == 0 && table.size == b.len);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_table(index, 1, &table, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_table(NULL, 0, &table, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_table(index, 0, NULL, err));

    LocusFunction function;
    EXPECT(LOCUS_OK, locus_index_function(index, 0, 0, &function, err));
    CHECK(function.address == 0x1000 && function.stack_size == 16 && function.record_count == 2);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_function(index, 0, 1, &function, err));
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_function(index, 3, 0, &function, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_function(NULL, 0, 0, &function, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_function(index, 0, 0, NULL, err));

    uint64_t constant;
    EXPECT(LOCUS_OK, locus_index_constant(index, 0, 0, &constant, err));
    CHECK(constant == 0x123456789ull);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_constant(index, 0, 1, &constant, err));
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_constant(index, 0, UINT64_MAX, &constant, err));
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_constant(index, 1, 0, &constant, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_constant(NULL, 0, 0, &constant, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_constant(index, 0, 0, NULL, err));

    LocusRecord r;
    EXPECT(LOCUS_OK, locus_index_record(index, 0, &r, err));
    CHECK(r.number == 0 && r.id == 42 && r.instruction_offset == 0x10);
    CHECK(r.address == 0x1110 && r.function_address == 0x1000 && r.stack_size == 16);
    CHECK(r.table == 0 && r.function == 0 && r.num_locations == 7 && r.num_live_outs == 1);
    CHECK(r.section_offset == 48 && r.flags == 0);
    EXPECT(LOCUS_OK, locus_index_record(index, 1, &r, err));
    CHECK(r.number == 1 && r.id == 7 && r.address == 0x1120);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_record(index, 2, &r, err));
    CHECK(strstr(last_error.message, "record 2") != NULL);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_record(index, UINT64_MAX, &r, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_record(NULL, 0, &r, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_record(index, 0, NULL, err));

    EXPECT(LOCUS_OK, locus_index_record_by_address(index, 0, &r, err));
    CHECK(r.id == 42);
    EXPECT(LOCUS_OK, locus_index_record_by_address(index, 1, &r, err));
    CHECK(r.id == 7);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_record_by_address(index, 2, &r, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_record_by_address(NULL, 0, &r, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_record_by_address(index, 0, NULL, err));

    /* Lookups. */
    LocusRecord found[2];
    size_t n = 99;
    EXPECT(LOCUS_OK, locus_index_lookup(index, 0x1110, found, 2, &n, err));
    CHECK(n == 1 && found[0].id == 42 && found[0].number == 0);
    EXPECT(LOCUS_OK, locus_index_lookup(index, 0x1110, NULL, 0, &n, err));
    CHECK(n == 1);
    EXPECT(LOCUS_OK, locus_index_lookup(index, 0x1010, found, 2, &n, err)); /* no bias */
    CHECK(n == 0);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup(index, 0x1110, NULL, 1, &n, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup(index, 0x1110, found, 2, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup(NULL, 0x1110, found, 2, &n, err));
    /* Many addresses at once: hits, misses, repeats; more than the lookahead. */
    uint64_t addresses[40];
    LocusRecord each[40];
    size_t counts[40];
    for (int i = 0; i < 40; i++)
        addresses[i] = i % 3 == 0 ? 0x1110 : i % 3 == 1 ? 0x1120 : 0x1111 + (uint64_t)i;
    memset(each, 0x77, sizeof each);
    EXPECT(LOCUS_OK, locus_index_lookup_each(index, addresses, 40, each, counts, err));
    int each_ok = 1;
    for (int i = 0; i < 40; i++) {
        LocusRecord one[2];
        size_t m = 9;
        each_ok &= locus_index_lookup(index, addresses[i], one, 2, &m, NULL) == LOCUS_OK;
        each_ok &= counts[i] == m && (m == 0 ? each[i].id == 0 && each[i].number == 0
                                             : each[i].number == one[0].number);
    }
    CHECK(each_ok);
    CHECK(counts[0] == 1 && each[0].id == 42 && counts[1] == 1 && each[1].id == 7 && counts[2] == 0);
    EXPECT(LOCUS_OK, locus_index_lookup_each(index, NULL, 0, NULL, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_each(index, NULL, 2, each, counts, err));
    CHECK(strstr(last_error.message, "addresses") != NULL);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_each(index, addresses, 2, NULL, counts, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_each(index, addresses, 2, each, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_each(NULL, addresses, 2, each, counts, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT,
           locus_index_lookup_each(index, addresses, SIZE_MAX / 2, each, counts, err));
    EXPECT(LOCUS_OK, locus_index_lookup_id(index, 7, found, 2, &n, err));
    CHECK(n == 1 && found[0].number == 1 && found[0].address == 0x1120);
    EXPECT(LOCUS_OK, locus_index_lookup_id(index, 8, found, 2, &n, err));
    CHECK(n == 0);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_id(index, 7, NULL, 1, &n, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_id(index, 7, found, 1, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_lookup_id(NULL, 7, found, 1, &n, err));
    EXPECT(LOCUS_OK, locus_index_nearest_before(index, 0x1115, &r, err));
    CHECK(r.id == 42);
    EXPECT(LOCUS_OK, locus_index_nearest_before(index, UINT64_MAX, &r, err));
    CHECK(r.id == 7);
    EXPECT(LOCUS_ERR_NOT_FOUND, locus_index_nearest_before(index, 0x1110, &r, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_nearest_before(index, 0x1115, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_nearest_before(NULL, 0x1115, &r, err));

    /* Locations and live-outs. */
    LocusLocation loc[7];
    for (int i = 0; i < 7; i++)
        EXPECT(LOCUS_OK, locus_record_location(index, 0, i, &loc[i], err));
    CHECK(loc[0].kind == LOCUS_LOCATION_REGISTER && loc[0].dwarf_reg == 3 && loc[0].size == 8);
    CHECK(loc[1].kind == LOCUS_LOCATION_INDIRECT && loc[1].dwarf_reg == 7 && loc[1].offset == 8);
    CHECK(loc[2].kind == LOCUS_LOCATION_DIRECT && loc[2].dwarf_reg == 6 && loc[2].offset == -16);
    CHECK(loc[3].kind == LOCUS_LOCATION_CONSTANT && loc[3].offset == -3 &&
          loc[3].constant == (uint64_t)-3 && loc[3].size == 4);
    CHECK(loc[4].kind == LOCUS_LOCATION_CONSTANT_INDEX && loc[4].constant_index == 0 &&
          loc[4].constant == 0x123456789ull);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_location(index, 0, 7, &loc[0], err));
    CHECK(strstr(last_error.message, "location 7") != NULL);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_location(index, 5, 0, &loc[0], err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_location(index, 0, 0, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_location(NULL, 0, 0, &loc[0], err));
    /* loc[0] was not overwritten by the failed calls. */
    CHECK(loc[0].kind == LOCUS_LOCATION_REGISTER);

    LocusLiveOut lo;
    EXPECT(LOCUS_OK, locus_record_live_out(index, 0, 0, &lo, err));
    CHECK(lo.dwarf_reg == 0 && lo.size == 8);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_live_out(index, 0, 1, &lo, err));
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_live_out(index, 1, 0, &lo, err));
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_live_out(index, 9, 0, &lo, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_live_out(index, 0, 0, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_live_out(NULL, 0, 0, &lo, err));

    /* Values from a register array and this process's own memory. */
    uint64_t stack[4] = {0, 0x1122334455667788ull, 0x99, 0};
    uint64_t regs[8] = {0};
    regs[3] = 0xfedcba9876543210ull;
    regs[6] = 0x8000;
    regs[7] = (uint64_t)(uintptr_t)stack;
    LocusFrame frame = {.registers = regs, .num_registers = 8};
    uint64_t v;
    EXPECT(LOCUS_OK, locus_location_value(&loc[0], &frame, &v, err));
    CHECK(v == 0xfedcba9876543210ull);
    EXPECT(LOCUS_OK, locus_location_value(&loc[1], &frame, &v, err));
    CHECK(v == 0x1122334455667788ull);
    EXPECT(LOCUS_OK, locus_location_value(&loc[2], &frame, &v, err));
    CHECK(v == 0x8000 - 16);
    EXPECT(LOCUS_OK, locus_location_value(&loc[3], &frame, &v, err));
    CHECK(v == (uint64_t)-3);
    EXPECT(LOCUS_OK, locus_location_value(&loc[4], &frame, &v, err));
    CHECK(v == 0x123456789ull);
    EXPECT(LOCUS_OK, locus_location_value(&loc[5], &frame, &v, err)); /* 4 of 8 bytes */
    CHECK(v == 0x76543210ull);
    EXPECT(LOCUS_ERR_UNSUPPORTED_SIZE, locus_location_value(&loc[6], &frame, &v, err));
    EXPECT(LOCUS_OK, locus_location_address(&loc[6], &frame, &v, err));
    CHECK(v == (uint64_t)(uintptr_t)&stack[1]);
    EXPECT(LOCUS_OK, locus_location_address(&loc[2], &frame, &v, err));
    CHECK(v == 0x8000 - 16);
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_location_address(&loc[0], &frame, &v, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_location_address(&loc[3], &frame, &v, err));
    LocusLocation bad = loc[0];
    bad.kind = 9;
    EXPECT(LOCUS_ERR_BAD_LOCATION_KIND, locus_location_value(&bad, &frame, &v, err));
    EXPECT(LOCUS_ERR_BAD_LOCATION_KIND, locus_location_address(&bad, &frame, &v, err));
    bad = loc[0];
    bad.dwarf_reg = 8; /* past the array */
    EXPECT(LOCUS_ERR_REGISTER_UNAVAILABLE, locus_location_value(&bad, &frame, &v, err));
    EXPECT(LOCUS_ERR_REGISTER_UNAVAILABLE, locus_location_address(&loc[2], &(LocusFrame){0}, &v, err));
    bad.size = 3; /* a register value of 3 bytes */
    bad.dwarf_reg = 3;
    EXPECT(LOCUS_ERR_UNSUPPORTED_SIZE, locus_location_value(&bad, &frame, &v, err));
    bad = loc[1];
    bad.dwarf_reg = 0;
    regs[0] = (uint64_t)-8; /* [R#0 + 8] is address 0: refused, not read */
    EXPECT(LOCUS_ERR_MEMORY_UNREADABLE, locus_location_value(&bad, &frame, &v, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_value(NULL, &frame, &v, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_value(&loc[0], NULL, &v, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_value(&loc[0], &frame, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_address(NULL, &frame, &v, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_address(&loc[1], NULL, &v, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_location_address(&loc[1], &frame, NULL, err));

    /* Values through callbacks, and a big-endian frame. */
    FakeFrame fake = {.sp = 0x7000, .mem = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
    LocusFrame cb = {.context = &fake, .read_register = fake_register, .read_memory = fake_memory};
    EXPECT(LOCUS_OK, locus_location_value(&loc[0], &cb, &v, err));
    CHECK(v == 0xabc);
    EXPECT(LOCUS_OK, locus_location_value(&loc[1], &cb, &v, err));
    CHECK(v == 0x0807060504030201ull);
    LocusLocation narrow = loc[1];
    narrow.size = 4;
    EXPECT(LOCUS_OK, locus_location_value(&narrow, &cb, &v, err));
    CHECK(v == 0x04030201ull);
    cb.big_endian = true;
    EXPECT(LOCUS_OK, locus_location_value(&narrow, &cb, &v, err));
    CHECK(v == 0x01020304ull);
    cb.big_endian = false;
    EXPECT(LOCUS_ERR_REGISTER_UNAVAILABLE, locus_location_value(&loc[2], &cb, &v, err));
    CHECK(strstr(last_error.message, "register 6") != NULL);
    bad = loc[1];
    bad.offset = 64;
    EXPECT(LOCUS_ERR_MEMORY_UNREADABLE, locus_location_value(&bad, &cb, &v, err));
    CHECK(strstr(last_error.message, "0x7040") != NULL);

    /* All values of a record at once. */
    uint64_t values[6];
    EXPECT(LOCUS_OK, locus_record_values(index, 1, &frame, values, 6, err));
    CHECK(values[0] == 0 && values[1] == 1 && values[2] == 1);
    CHECK(values[3] == 0xfedcba9876543210ull && values[4] == 0x1122334455667788ull &&
          values[5] == 0x1122334455667788ull);
    EXPECT(LOCUS_ERR_BUFFER_TOO_SMALL, locus_record_values(index, 1, &frame, values, 5, err));
    EXPECT(LOCUS_ERR_UNSUPPORTED_SIZE, locus_record_values(index, 0, &frame, values, 6 + 1, err));
    CHECK(strstr(last_error.message, "location 6") != NULL);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_values(index, 2, &frame, values, 6, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_values(index, 1, &frame, NULL, 6, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_values(index, 1, NULL, values, 6, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_values(NULL, 1, &frame, values, 6, err));

    /* The statepoint view. */
    LocusStatepoint sp;
    EXPECT(LOCUS_OK, locus_record_statepoint(index, 1, &sp, err));
    CHECK(sp.id == 7 && sp.calling_convention == 0 && sp.flags == 1);
    CHECK(sp.num_deopt == 1 && sp.num_gc_pointers == 1);
    EXPECT(LOCUS_ERR_NOT_A_STATEPOINT, locus_record_statepoint(index, 0, &sp, err));
    CHECK(last_error.offset == 48);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_record_statepoint(index, 2, &sp, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_statepoint(index, 1, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_record_statepoint(NULL, 1, &sp, err));
    LocusLocation deopt;
    EXPECT(LOCUS_OK, locus_statepoint_deopt(index, 1, 0, &deopt, err));
    CHECK(deopt.kind == LOCUS_LOCATION_REGISTER && deopt.dwarf_reg == 3);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_statepoint_deopt(index, 1, 1, &deopt, err));
    EXPECT(LOCUS_ERR_NOT_A_STATEPOINT, locus_statepoint_deopt(index, 0, 0, &deopt, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_statepoint_deopt(index, 1, 0, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_statepoint_deopt(NULL, 1, 0, &deopt, err));
    LocusGcPointer pair;
    EXPECT(LOCUS_OK, locus_statepoint_gc_pointer(index, 1, 0, &pair, err));
    CHECK(pair.base.kind == LOCUS_LOCATION_INDIRECT && pair.base.offset == 8);
    CHECK(pair.derived.kind == LOCUS_LOCATION_INDIRECT && pair.derived.dwarf_reg == 7);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_statepoint_gc_pointer(index, 1, 1, &pair, err));
    EXPECT(LOCUS_ERR_NOT_A_STATEPOINT, locus_statepoint_gc_pointer(index, 0, 0, &pair, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_statepoint_gc_pointer(index, 1, 0, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_statepoint_gc_pointer(NULL, 1, 0, &pair, err));

    /* A NULL error record is fine: the status alone comes back. */
    CHECK(locus_index_record(index, 5, &r, NULL) == LOCUS_ERR_OUT_OF_RANGE);
    CHECK(locus_index_record(index, 0, &r, NULL) == LOCUS_OK);
    locus_index_free(index);
    locus_index_free(NULL);
}

/* Damaged and odd sections: each is refused with its code, `*out_index` is NULL. */
static void test_bad_sections(void) {
    Buf good = section(2);
    LocusIndex *index;

    /* Every truncation of the section. */
    int truncations = 0, truncated_code = 0;
    for (size_t len = 0; len < good.len; len++) {
        index = (LocusIndex *)1;
        LocusError e;
        LocusStatus s = locus_index_from_section(good.bytes, len, LOCUS_ENDIAN_LITTLE, 0, 0,
                                                 &index, &e);
        truncations++;
        error_cases++;
        checks++;
        if (s == LOCUS_OK || index != NULL || e.code != s || e.message[0] == 0) {
            failures++;
            fprintf(stderr, "truncated to %zu bytes: %s, index %p\n", len, locus_status_name(s),
                    (void *)index);
        }
        truncated_code += s == LOCUS_ERR_TRUNCATED || s == LOCUS_ERR_COUNT_TOO_LARGE ||
                          (len == 0 && s == LOCUS_ERR_EMPTY_SECTION);
        locus_index_free(index);
    }
    CHECK(truncated_code == truncations);
    EXPECT(LOCUS_ERR_EMPTY_SECTION,
           locus_index_from_section(NULL, 0, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_TRUNCATED,
           locus_index_from_section(good.bytes, 8, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    CHECK(last_error.offset == 0 && index == NULL);

    Buf b = good;
    b.bytes[at_version] = 2;
    EXPECT(LOCUS_ERR_UNSUPPORTED_VERSION,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    b = good;
    b.bytes[at_num_records + 3] = 0x10;
    EXPECT(LOCUS_ERR_COUNT_TOO_LARGE,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    CHECK(last_error.offset == at_num_records);
    b = good;
    b.bytes[at_version + 1] = 1;
    EXPECT(LOCUS_ERR_NONZERO_RESERVED,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    EXPECT(LOCUS_OK, locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0,
                                              LOCUS_INDEX_LENIENT, &index, err));
    locus_index_free(index);
    b = good;
    b.bytes[at_first_kind] = 9;
    EXPECT(LOCUS_ERR_BAD_LOCATION_KIND,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    CHECK(last_error.offset == at_first_kind);
    b = good;
    b.bytes[at_constant_index] = 5;
    EXPECT(LOCUS_ERR_CONSTANT_INDEX_OUT_OF_RANGE,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_COUNT_TOO_LARGE,
           locus_index_from_section(good.bytes, good.len, LOCUS_ENDIAN_BIG, 0, 0, &index, err));

    /* A function that claims one record of two: strict refuses, lenient keeps the second
     * record outside the address index and without a function. */
    b = section(1);
    EXPECT(LOCUS_ERR_RECORD_COUNT_MISMATCH,
           locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    EXPECT(LOCUS_OK, locus_index_from_section(b.bytes, b.len, LOCUS_ENDIAN_LITTLE, 0,
                                              LOCUS_INDEX_LENIENT, &index, err));
    LocusIndexInfo info;
    LocusRecord r;
    EXPECT(LOCUS_OK, locus_index_info(index, &info, err));
    CHECK(info.num_records == 2 && info.num_indexed == 1);
    EXPECT(LOCUS_OK, locus_index_record(index, 1, &r, err));
    CHECK(r.function == LOCUS_NO_FUNCTION && r.id == 7);
    EXPECT(LOCUS_ERR_OUT_OF_RANGE, locus_index_record_by_address(index, 1, &r, err));
    locus_index_free(index);

    /* Bad arguments. */
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT,
           locus_index_from_section(good.bytes, good.len, 7, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT,
           locus_index_from_section(good.bytes, good.len, LOCUS_ENDIAN_LITTLE, 0, 0x80, &index, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT,
           locus_index_from_section(good.bytes, good.len, LOCUS_ENDIAN_LITTLE, 0,
                                    LOCUS_INDEX_UNRELOCATED, &index, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT,
           locus_index_from_section(good.bytes, SIZE_MAX, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT,
           locus_index_from_section(NULL, 16, LOCUS_ENDIAN_LITTLE, 0, 0, &index, err));
    CHECK(strstr(last_error.message, "data") != NULL && index == NULL);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT,
           locus_index_from_section(good.bytes, good.len, LOCUS_ENDIAN_LITTLE, 0, 0, NULL, err));
    CHECK(strstr(last_error.message, "out_index") != NULL);
    EXPECT(LOCUS_OK, locus_index_from_section(good.bytes, good.len, LOCUS_ENDIAN_NATIVE, 0, 0,
                                              &index, err));
    locus_index_free(index);
}

static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = n > 0 ? malloc((size_t)n) : NULL;
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return data;
}

static void test_object(const char *path, const char *self) {
    size_t size, self_size;
    uint8_t *data = read_file(path, &size);
    uint8_t *exe = read_file(self, &self_size);
    CHECK(data != NULL && exe != NULL);
    if (!data || !exe)
        return;

    LocusObjectInfo info;
    EXPECT(LOCUS_OK, locus_object_info(data, size, &info, err));
    CHECK(info.format == LOCUS_FORMAT_ELF && info.arch == LOCUS_ARCH_X86_64 && info.is_64);
    CHECK(!info.big_endian && info.has_stackmaps && !info.has_load_name && info.machine == 62);
    CHECK(strcmp(info.format_name, "elf64-x86-64") == 0 && strcmp(info.arch_name, "x86_64") == 0);
    EXPECT(LOCUS_OK, locus_object_info(exe, self_size, &info, err));
    CHECK(!info.has_stackmaps);
    EXPECT(LOCUS_ERR_OBJECT, locus_object_info((const uint8_t *)"hello", 5, &info, err));
    EXPECT(LOCUS_ERR_OBJECT, locus_object_info(data, 100, &info, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_object_info(NULL, 5, &info, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_object_info(data, size, NULL, err));

    /* Relocated (the default): every record is found at its own address. */
    LocusIndex *index;
    EXPECT(LOCUS_OK, locus_index_from_object(data, size, 0x400000, 0, &index, err));
    LocusIndexInfo ii;
    EXPECT(LOCUS_OK, locus_index_info(index, &ii, err));
    CHECK(ii.arch == LOCUS_ARCH_X86_64 && ii.num_tables == 1 && ii.num_records == 8);
    CHECK(ii.num_indexed == 8 && ii.load_bias == 0x400000);
    int found_all = 1, distinct_functions = 0;
    uint64_t last_function = UINT64_MAX;
    for (uint64_t i = 0; i < ii.num_records; i++) {
        LocusRecord r, hits[4];
        size_t n = 0;
        found_all &= locus_index_record(index, i, &r, NULL) == LOCUS_OK;
        found_all &= locus_index_lookup(index, r.address, hits, 4, &n, NULL) == LOCUS_OK;
        int hit = 0;
        for (size_t k = 0; k < n && k < 4; k++)
            hit |= hits[k].number == i;
        found_all &= hit;
        found_all &= r.address >= 0x400000;
        if (r.function_address != last_function)
            distinct_functions++, last_function = r.function_address;
    }
    CHECK(found_all);
    CHECK(distinct_functions == 6); /* six functions at six addresses once relocated */
    /* Address order is sorted. */
    uint64_t previous = 0;
    int sorted = 1;
    for (uint64_t i = 0; i < ii.num_indexed; i++) {
        LocusRecord r;
        sorted &= locus_index_record_by_address(index, i, &r, NULL) == LOCUS_OK;
        sorted &= r.address >= previous;
        previous = r.address;
    }
    CHECK(sorted);

    /* fixtures/runtime.ll's first statepoint: "deopt"(i64 %state, i32 9, i64 4294967297)
     * and three gc-live pointers. */
    LocusRecord sp_record;
    size_t n;
    EXPECT(LOCUS_OK, locus_index_lookup_id(index, 6, &sp_record, 1, &n, err));
    CHECK(n == 1);
    LocusStatepoint sp;
    EXPECT(LOCUS_OK, locus_record_statepoint(index, sp_record.number, &sp, err));
    CHECK(sp.num_deopt == 3 && sp.flags == 0 && sp.calling_convention == 0);
    CHECK(3 + sp.num_deopt + 2 * sp.num_gc_pointers == sp_record.num_locations);
    CHECK(sp.num_gc_pointers >= 2);
    LocusLocation d;
    EXPECT(LOCUS_OK, locus_statepoint_deopt(index, sp_record.number, 1, &d, err));
    CHECK(d.kind == LOCUS_LOCATION_CONSTANT && d.constant == 9);
    EXPECT(LOCUS_OK, locus_statepoint_deopt(index, sp_record.number, 2, &d, err));
    CHECK(d.kind == LOCUS_LOCATION_CONSTANT_INDEX && d.constant == 4294967297ull);
    /* The stack map with ID UINT64_MAX: constants 7 and -3, pool constants. */
    EXPECT(LOCUS_OK, locus_index_lookup_id(index, UINT64_MAX, &sp_record, 1, &n, err));
    CHECK(n == 1 && sp_record.num_locations == 6);
    EXPECT(LOCUS_OK, locus_record_location(index, sp_record.number, 1, &d, err));
    CHECK(d.kind == LOCUS_LOCATION_CONSTANT && d.constant == (uint64_t)-3);
    EXPECT(LOCUS_OK, locus_record_location(index, sp_record.number, 3, &d, err));
    CHECK(d.kind == LOCUS_LOCATION_CONSTANT_INDEX && d.constant == 0xfedcba9876543210ull);
    locus_index_free(index);

    /* Unrelocated: the bytes as stored, every function address 0 in a .o. */
    EXPECT(LOCUS_OK, locus_index_from_object(data, size, 0, LOCUS_INDEX_UNRELOCATED, &index, err));
    LocusFunction f;
    int zero = 1;
    for (uint64_t i = 0; i < 6; i++)
        zero &= locus_index_function(index, 0, i, &f, NULL) == LOCUS_OK && f.address == 0;
    CHECK(zero);
    locus_index_free(index);

    index = (LocusIndex *)1;
    EXPECT(LOCUS_ERR_NO_STACKMAPS, locus_index_from_object(exe, self_size, 0, 0, &index, err));
    CHECK(index == NULL);
    EXPECT(LOCUS_ERR_OBJECT, locus_index_from_object((const uint8_t *)"hello", 5, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_OBJECT, locus_index_from_object(data, 64, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_index_from_object(data, size, 0, 4, &index, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_from_object(NULL, size, 0, 0, &index, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_index_from_object(data, size, 0, 0, NULL, err));
    free(data);
    free(exe);
}

/* --- patching ---------------------------------------------------------------------------- */

static int calls;
static void bump(void) { calls++; }

static void test_encoders(void) {
    uint32_t host;
#if defined(__x86_64__)
    EXPECT(LOCUS_OK, locus_host_arch(&host, err));
    CHECK(host == LOCUS_ARCH_X86_64);
#elif defined(__aarch64__)
    EXPECT(LOCUS_OK, locus_host_arch(&host, err));
    CHECK(host == LOCUS_ARCH_AARCH64);
#else
    EXPECT(LOCUS_ERR_UNSUPPORTED, locus_host_arch(&host, err));
#endif
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_host_arch(NULL, err));

    size_t len;
    EXPECT(LOCUS_OK, locus_call_sequence_len(LOCUS_ARCH_X86_64, 0xdeadbeef, &len, err));
    CHECK(len == 13);
    EXPECT(LOCUS_OK, locus_call_sequence_len(LOCUS_ARCH_AARCH64, 0x123456789abcull, &len, err));
    CHECK(len == 16);
    EXPECT(LOCUS_OK, locus_call_sequence_len(LOCUS_ARCH_AARCH64, 1ull << 50, &len, err));
    CHECK(len == 20);
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_call_sequence_len(9, 0, &len, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_call_sequence_len(LOCUS_ARCH_UNKNOWN, 0, &len, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_call_sequence_len(LOCUS_ARCH_X86_64, 0, NULL, err));

    /* x86-64: movabs $0xdeadbeef, %r11; call *%r11; then a 2-byte nop. */
    uint8_t out[32];
    static const uint8_t x86_call[15] = {0x49, 0xbb, 0xef, 0xbe, 0xad, 0xde, 0, 0,
                                         0,    0,    0x41, 0xff, 0xd3, 0x66, 0x90};
    EXPECT(LOCUS_OK, locus_encode_call(LOCUS_ARCH_X86_64, 0xdeadbeef, out, 15, err));
    CHECK(memcmp(out, x86_call, 15) == 0);
    uint8_t nops[2];
    EXPECT(LOCUS_OK, locus_encode_nops(LOCUS_ARCH_X86_64, nops, 2, err));
    CHECK(memcmp(nops, x86_call + 13, 2) == 0);
    memset(out, 0xcc, sizeof out);
    EXPECT(LOCUS_ERR_PATCH_TOO_LARGE, locus_encode_call(LOCUS_ARCH_X86_64, 1, out, 12, err));
    CHECK(out[0] == 0xcc); /* nothing written */
    EXPECT(LOCUS_ERR_PATCH_TOO_LARGE, locus_encode_call(LOCUS_ARCH_X86_64, 1, NULL, 0, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_encode_call(LOCUS_ARCH_X86_64, 1, NULL, 16, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_encode_call(3, 1, out, 16, err));

    /* AArch64: movz/movk x16 (three below 2^48, high half first, as LLVM's own patch point
     * call), blr x16, then nop. The words are what `llvm-mc-19 -triple=aarch64
     * -show-encoding` gives for each instruction. */
    EXPECT(LOCUS_OK, locus_encode_call(LOCUS_ARCH_AARCH64, 0x123456789abcull, out, 20, err));
    uint32_t w[5];
    memcpy(w, out, 20);
    CHECK(w[0] == 0xd2c24690u); /* movz x16, #0x1234, lsl #32 */
    CHECK(w[1] == 0xf2aacf10u); /* movk x16, #0x5678, lsl #16 */
    CHECK(w[2] == 0xf2935790u); /* movk x16, #0x9abc */
    CHECK(w[3] == 0xd63f0200u);                          /* blr x16 */
    CHECK(w[4] == 0xd503201fu);                          /* nop */
    EXPECT(LOCUS_ERR_MISALIGNED_PATCH, locus_encode_call(LOCUS_ARCH_AARCH64, 1, out, 22, err));
    EXPECT(LOCUS_ERR_PATCH_TOO_LARGE, locus_encode_call(LOCUS_ARCH_AARCH64, 1ull << 50, out, 16, err));
    EXPECT(LOCUS_OK, locus_encode_nops(LOCUS_ARCH_AARCH64, out, 8, err));
    memcpy(w, out, 8);
    CHECK(w[0] == 0xd503201fu && w[1] == 0xd503201fu);
    EXPECT(LOCUS_ERR_MISALIGNED_PATCH, locus_encode_nops(LOCUS_ARCH_AARCH64, out, 6, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_encode_nops(LOCUS_ARCH_AARCH64, NULL, 8, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_encode_nops(0, out, 8, err));
    EXPECT(LOCUS_OK, locus_encode_nops(LOCUS_ARCH_X86_64, NULL, 0, err));

    char name[8];
    size_t name_len = 0;
    EXPECT(LOCUS_OK, locus_register_name(LOCUS_ARCH_X86_64, 7, name, sizeof name, &name_len, err));
    CHECK(strcmp(name, "rsp") == 0 && name_len == 3);
    EXPECT(LOCUS_OK, locus_register_name(LOCUS_ARCH_AARCH64, 31, name, sizeof name, NULL, err));
    CHECK(strcmp(name, "sp") == 0);
    EXPECT(LOCUS_ERR_BUFFER_TOO_SMALL,
           locus_register_name(LOCUS_ARCH_X86_64, 17, name, 4, &name_len, err));
    CHECK(name_len == 4); /* "xmm0" needs 5 bytes with its NUL */
    EXPECT(LOCUS_ERR_NOT_FOUND, locus_register_name(LOCUS_ARCH_X86_64, 500, name, 8, NULL, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_register_name(LOCUS_ARCH_X86_64, 7, NULL, 8, NULL, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_register_name(5, 7, name, 8, NULL, err));

    CHECK(strcmp(locus_status_name(LOCUS_OK), "LOCUS_OK") == 0);
    CHECK(strcmp(locus_status_name(LOCUS_ERR_TRUNCATED), "LOCUS_ERR_TRUNCATED") == 0);
    CHECK(strcmp(locus_status_name(-1), "LOCUS_UNKNOWN_STATUS") == 0);
}

/* A function in a fresh code page with a patch region in its middle; the test runs it,
 * patches the region with a call to bump(), runs it, patches nops back, runs it. */
static void test_code_patching(void) {
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *code = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    CHECK(code != MAP_FAILED);
    if (code == MAP_FAILED)
        return;
    size_t region, reserved;
    uint32_t arch;
#if defined(__x86_64__)
    /* sub $8, %rsp (keeps the call 16-byte aligned); 16 bytes of nop; add $8, %rsp; ret */
    static const uint8_t prologue[] = {0x48, 0x83, 0xec, 0x08};
    static const uint8_t epilogue[] = {0x48, 0x83, 0xc4, 0x08, 0xc3};
    arch = LOCUS_ARCH_X86_64, reserved = 16;
#elif defined(__aarch64__)
    /* stp x29, x30, [sp, #-16]!; mov x29, sp; 20 bytes of nop; ldp x29, x30, [sp], #16; ret */
    static const uint8_t prologue[] = {0xfd, 0x7b, 0xbf, 0xa9, 0xfd, 0x03, 0x00, 0x91};
    static const uint8_t epilogue[] = {0xfd, 0x7b, 0xc1, 0xa8, 0xc0, 0x03, 0x5f, 0xd6};
    arch = LOCUS_ARCH_AARCH64, reserved = 20;
#else
    munmap(code, (size_t)page);
    return;
#endif
    region = sizeof prologue;
    memcpy(code, prologue, sizeof prologue);
    EXPECT(LOCUS_OK, locus_encode_nops(arch, code + region, reserved, err));
    memcpy(code + region + reserved, epilogue, sizeof epilogue);
    CHECK(mprotect(code, (size_t)page, PROT_READ | PROT_EXEC) == 0);
    void (*run)(void);
    memcpy(&run, &code, sizeof run); /* object pointer to function pointer */

    run();
    CHECK(calls == 0);
    EXPECT(LOCUS_OK, locus_patch_call(arch, code + region, reserved, (uint64_t)(uintptr_t)bump, err));
    run();
    CHECK(calls == 1);
    EXPECT(LOCUS_OK, locus_patch_nops(arch, code + region, reserved, err));
    run();
    CHECK(calls == 1);
    uint8_t bytes[32];
    EXPECT(LOCUS_OK, locus_encode_call(arch, (uint64_t)(uintptr_t)bump, bytes, reserved, err));
    EXPECT(LOCUS_OK, locus_write_code(code + region, bytes, reserved, err));
    run();
    run();
    CHECK(calls == 3);
    /* Refused before anything is written: the function still calls bump(). */
    EXPECT(LOCUS_ERR_PATCH_TOO_LARGE, locus_patch_call(arch, code + region, 8, 1, err));
    EXPECT(LOCUS_ERR_MISALIGNED_PATCH,
           locus_patch_call(LOCUS_ARCH_AARCH64, code + 2, 20, (uint64_t)(uintptr_t)bump, err));
    EXPECT(LOCUS_ERR_MISALIGNED_PATCH, locus_patch_nops(LOCUS_ARCH_AARCH64, code + 2, 8, err));
    EXPECT(LOCUS_ERR_MISALIGNED_PATCH, locus_patch_nops(LOCUS_ARCH_AARCH64, code + 4, 6, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_patch_call(7, code + region, reserved, 1, err));
    EXPECT(LOCUS_ERR_INVALID_ARGUMENT, locus_patch_nops(7, code + region, reserved, err));
    run();
    CHECK(calls == 4);
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_patch_call(arch, NULL, reserved, 1, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_patch_nops(arch, NULL, reserved, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_write_code(NULL, bytes, 4, err));
    EXPECT(LOCUS_ERR_NULL_ARGUMENT, locus_write_code(code, NULL, 4, err));
    EXPECT(LOCUS_OK, locus_write_code(NULL, NULL, 0, err));
    CHECK(munmap(code, (size_t)page) == 0);

    /* A page that is no longer mapped: mprotect fails with ENOMEM. */
    EXPECT(LOCUS_ERR_CODE_WRITE, locus_write_code(code, bytes, 4, err));
    CHECK(last_error.os_error == ENOMEM);
    EXPECT(LOCUS_ERR_CODE_WRITE, locus_patch_nops(arch, code + region, reserved, err));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OBJECT\n", argv[0]);
        return 2;
    }
    test_section();
    test_bad_sections();
    test_object(argv[1], "/proc/self/exe");
    test_encoders();
    test_code_patching();
    printf("api_test: %d checks, %d error cases, %d failed\n", checks, error_cases, failures);
    return failures ? 1 : 0;
}
