// The LLVM anchor for benches/index_lookup.rs: what a runtime that uses LLVM's own
// llvm::StackMapParser builds before it can look a return address up, and that lookup.
//
// The index: header validation, StackMapParser construction, then an
// llvm::DenseMap<uint64_t, llvm::SmallVector<RecordAccessor, 1>> from absolute address
// (function address + instruction offset) to the records there, in section order, reserved
// for the number of records up front. A lookup is one DenseMap::find; what it folds is each
// record's byte offset in the section (the record's pointer minus the section's start), so
// neither side reads the record's bytes, the same fold as the Locus side.
//
// Built at bench run time (never by cargo) with clang++-19 -O2 -DNDEBUG, the flags of
// `llvm-config-19 --cxxflags`, -fPIC -shared, linked against libLLVM-19.so, and dlopen'ed.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Object/StackMapParser.h"
#include "llvm/Support/Error.h"

namespace {

using Parser = llvm::StackMapParser<llvm::endianness::little>;
using Rec = Parser::RecordAccessor;
using Map = llvm::DenseMap<uint64_t, llvm::SmallVector<Rec, 1>>;

static_assert(sizeof(Rec) == sizeof(const uint8_t *), "RecordAccessor is one pointer");

struct Index {
  const uint8_t *section;
  Parser parser;
  Map map;
  explicit Index(llvm::ArrayRef<uint8_t> s) : section(s.data()), parser(s) {}
};

uint64_t now(int clock) {
  timespec ts{};
  clock_gettime(clockid_t(clock), &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// The record's byte offset in the section (RecordAccessor keeps its pointer private).
inline uint64_t offset_of(const Index &ix, const Rec &r) {
  const uint8_t *p;
  std::memcpy(&p, &r, sizeof p);
  return uint64_t(p - ix.section);
}

Index *build(const uint8_t *data, size_t len) {
  llvm::ArrayRef<uint8_t> section(data, len);
  if (llvm::Error e = Parser::validateHeader(section)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  auto *ix = new Index(section);
  const Parser &p = ix->parser;
  ix->map.reserve(p.getNumRecords());
  unsigned r = 0;
  for (auto &f : p.functions()) {
    uint64_t address = f.getFunctionAddress();
    for (uint64_t i = 0, n = f.getRecordCount(); i < n; ++i, ++r) {
      Rec rec = p.getRecord(r);
      ix->map[address + rec.getInstructionOffset()].push_back(rec);
    }
  }
  return ix;
}

} // namespace

// Builds the index of `data` (one little-endian version-3 table) and returns it, or null
// if LLVM rejects the header; the time it took on `clock` goes to *ns.
extern "C" void *llvm_index_build(const uint8_t *data, size_t len, int clock, uint64_t *ns) {
  uint64_t start = now(clock);
  Index *ix = build(data, len);
  asm volatile("" : : "r"(ix) : "memory");
  *ns = now(clock) - start;
  return ix;
}

extern "C" void llvm_index_free(void *ix) { delete static_cast<Index *>(ix); }

// Heap bytes: the DenseMap's bucket array (getMemorySize), the vectors of addresses with
// more than one record (their out-of-line buffers), and the parser's own record offsets.
extern "C" void llvm_index_memory(void *handle, uint64_t *map_bytes, uint64_t *spilled_bytes,
                                  uint64_t *parser_bytes, uint64_t *addresses) {
  auto *ix = static_cast<Index *>(handle);
  *map_bytes = ix->map.getMemorySize();
  uint64_t spilled = 0;
  for (auto &kv : ix->map)
    if (kv.second.capacity() > 1) // no longer in its one inline slot
      spilled += kv.second.capacity_in_bytes();
  *spilled_bytes = spilled;
  *parser_bytes = uint64_t(ix->parser.getNumRecords()) * sizeof(unsigned);
  *addresses = ix->map.size();
}

// Looks each of `addresses[0..n]` up with DenseMap::find, folding the offsets of the
// records found; returns the elapsed time on `clock`, the fold to *checksum.
extern "C" uint64_t llvm_index_lookups(void *handle, const uint64_t *addresses, size_t n,
                                       int clock, uint64_t *checksum) {
  const auto *ix = static_cast<const Index *>(handle);
  const Map &map = ix->map;
  uint64_t acc = 0;
  uint64_t start = now(clock);
  for (size_t i = 0; i < n; ++i) {
    auto it = map.find(addresses[i]);
    if (it != map.end())
      for (const Rec &r : it->second)
        acc += offset_of(*ix, r);
  }
  asm volatile("" : : "r"(acc) : "memory");
  uint64_t end = now(clock);
  *checksum = acc;
  return end - start;
}
