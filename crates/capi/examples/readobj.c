/* readobj: print the stack maps of object files as `llvm-readobj --stackmap` does, byte for
 * byte, through the Locus C API (tests/c.rs compares the two on objects from llc-19).
 *
 *   clang-19 -Icrates/capi/include crates/capi/examples/readobj.c target/debug/liblocus_capi.a \
 *       -lpthread -ldl -lm -lgcc_s -o readobj
 *   ./readobj file.o...
 *
 * Exit status: 0, or 1 when a file cannot be read or its stack maps are damaged (the error
 * goes to stderr with its code and message). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "locus.h"

/* Reads a whole file; NULL (and a message) on failure. */
static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *data = malloc(cap);
    size_t n;
    while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *bigger = realloc(data, cap *= 2);
            if (!bigger) {
                free(data);
                data = NULL;
            }
            data = bigger;
        }
    }
    if (ferror(f) || !data) {
        fprintf(stderr, "%s: cannot read the file\n", path);
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = len;
    return data;
}

static int fail(const char *path, const LocusError *err) {
    fprintf(stderr, "readobj: %s: %s: %s\n", path, locus_status_name(err->code), err->message);
    return 1;
}

/* One location as LLVM's stack map printer writes it. */
static void print_location(const LocusLocation *l) {
    switch (l->kind) {
    case LOCUS_LOCATION_REGISTER:
        printf("Register R#%u", (unsigned)l->dwarf_reg);
        break;
    case LOCUS_LOCATION_DIRECT:
        printf("Direct R#%u + %" PRId32, (unsigned)l->dwarf_reg, l->offset);
        break;
    case LOCUS_LOCATION_INDIRECT:
        printf("Indirect [R#%u + %" PRId32 "]", (unsigned)l->dwarf_reg, l->offset);
        break;
    case LOCUS_LOCATION_CONSTANT:
        /* llvm-readobj prints the small constant as an unsigned 32-bit number. */
        printf("Constant %" PRIu32, (uint32_t)l->offset);
        break;
    case LOCUS_LOCATION_CONSTANT_INDEX:
        printf("ConstantIndex #%" PRIu32 " (%" PRIu64 ")", l->constant_index, l->constant);
        break;
    }
    printf(", size: %u", (unsigned)l->size);
}

static int print_table(const char *path, const LocusIndex *index, uint64_t t) {
    LocusError err;
    LocusTable table;
    if (locus_index_table(index, t, &table, &err) != LOCUS_OK)
        return fail(path, &err);
    printf("LLVM StackMap Version: %u\nNum Functions: %" PRIu32, (unsigned)table.version,
           table.num_functions);
    for (uint32_t i = 0; i < table.num_functions; i++) {
        LocusFunction f;
        if (locus_index_function(index, t, i, &f, &err) != LOCUS_OK)
            return fail(path, &err);
        printf("\n  Function address: %" PRIu64 ", stack size: %" PRIu64
               ", callsite record count: %" PRIu64,
               f.address, f.stack_size, f.record_count);
    }
    printf("\nNum Constants: %" PRIu32, table.num_constants);
    for (uint32_t i = 0; i < table.num_constants; i++) {
        uint64_t c;
        if (locus_index_constant(index, t, i, &c, &err) != LOCUS_OK)
            return fail(path, &err);
        printf("\n  #%" PRIu32 ": %" PRIu64, i + 1, c);
    }
    printf("\nNum Records: %" PRIu32, table.num_records);
    for (uint32_t i = 0; i < table.num_records; i++) {
        LocusRecord r;
        if (locus_index_record(index, table.first_record + i, &r, &err) != LOCUS_OK)
            return fail(path, &err);
        printf("\n  Record ID: %" PRIu64 ", instruction offset: %" PRIu32
               "\n    %u locations:",
               r.id, r.instruction_offset, (unsigned)r.num_locations);
        for (uint16_t j = 0; j < r.num_locations; j++) {
            LocusLocation l;
            if (locus_record_location(index, r.number, j, &l, &err) != LOCUS_OK)
                return fail(path, &err);
            printf("\n      #%u: ", (unsigned)j + 1);
            print_location(&l);
        }
        printf("\n    %u live-outs: [ ", (unsigned)r.num_live_outs);
        for (uint16_t j = 0; j < r.num_live_outs; j++) {
            LocusLiveOut lo;
            if (locus_record_live_out(index, r.number, j, &lo, &err) != LOCUS_OK)
                return fail(path, &err);
            printf("R#%u (%u-bytes) ", (unsigned)lo.dwarf_reg, (unsigned)lo.size);
        }
        printf("]");
    }
    printf("\n");
    return 0;
}

static int dump(const char *path) {
    size_t size;
    uint8_t *data = read_file(path, &size);
    if (!data)
        return 1;
    LocusError err;
    LocusObjectInfo info;
    if (locus_object_info(data, size, &info, &err) != LOCUS_OK) {
        free(data);
        return fail(path, &err);
    }
    printf("\nFile: %s\nFormat: %s\nArch: %s\nAddressSize: %dbit\n", path, info.format_name,
           info.arch_name, info.is_64 ? 64 : 32);
    if (info.format == LOCUS_FORMAT_ELF)
        printf("LoadName: %s\n", info.has_load_name ? info.load_name : "<Not found>");
    int status = 0;
    if (info.has_stackmaps) {
        /* As stored in the file: llvm-readobj applies no relocations (function addresses
         * of a relocatable object print as 0). */
        LocusIndex *index;
        if (locus_index_from_object(data, size, 0, LOCUS_INDEX_UNRELOCATED, &index, &err) !=
            LOCUS_OK) {
            status = fail(path, &err);
        } else {
            LocusIndexInfo ii;
            status = locus_index_info(index, &ii, &err) != LOCUS_OK ? fail(path, &err) : 0;
            for (uint64_t t = 0; status == 0 && t < ii.num_tables; t++)
                status = print_table(path, index, t);
            locus_index_free(index);
        }
    }
    free(data);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    int status = 0;
    for (int i = 1; i < argc; i++)
        status |= dump(argv[i]);
    fflush(stdout);
    return status;
}
