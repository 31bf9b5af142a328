// The LLVM anchor for benches/parse_walk.rs: the same parse and full walk of a
// little-endian .llvm_stackmaps section, done with LLVM's own llvm::StackMapParser,
// folded into the same checksum as `locus_walk` in parse_walk.rs (keep the two in step).
//
// Checksum: h = 0; mix(h, v) = rotl(h, 5) ^ v; all arithmetic mod 2^64.
//   each function:  mix(h, address*F_ADDR + stack_size*F_STACK + record_count*F_COUNT)
//   each constant:  mix(h, value*C_VALUE)
//   each record:    v = id*R_ID + instruction_offset*R_OFFSET + num_locations*R_NLOC
//                       + num_live_outs*R_NLIVE
//                       + for each location: kind*L_KIND + size*L_SIZE, plus
//                           Register:        dwarf_reg*L_REG
//                           Direct/Indirect: dwarf_reg*L_REG + u32(offset)*L_OFFSET
//                           Constant:        u32(value)*L_SMALL
//                           ConstantIndex:   index*L_INDEX + Constants[index]*L_VALUE
//                       + for each live-out: dwarf_reg*O_REG + size*O_SIZE
//                   mix(h, v)
//
// Built at bench run time (never by cargo) with clang++-19 -O2 -DNDEBUG, the flags of
// `llvm-config-19 --cxxflags`, -fPIC -shared, linked against libLLVM-19.so, and dlopen'ed.

#include <cstddef>
#include <cstdint>
#include <ctime>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Object/StackMapParser.h"
#include "llvm/Support/Error.h"

namespace {

using Parser = llvm::StackMapParser<llvm::endianness::little>;
using Kind = Parser::LocationKind;

constexpr uint64_t F_ADDR = 0x9E3779B97F4A7C15ull;
constexpr uint64_t F_STACK = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t F_COUNT = 0x165667B19E3779F9ull;
constexpr uint64_t C_VALUE = 0x27D4EB2F165667C5ull;
constexpr uint64_t R_ID = 0xFF51AFD7ED558CCDull;
constexpr uint64_t R_OFFSET = 0xC4CEB9FE1A85EC53ull;
constexpr uint64_t R_NLOC = 0x2127599BF4325C37ull;
constexpr uint64_t R_NLIVE = 0x880355F21E6D1965ull;
constexpr uint64_t L_KIND = 0x94D049BB133111EBull;
constexpr uint64_t L_SIZE = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t L_REG = 0x9FB21C651E98DF25ull;
constexpr uint64_t L_OFFSET = 0xD6E8FEB86659FD93ull;
constexpr uint64_t L_SMALL = 0xA0761D6478BD642Full;
constexpr uint64_t L_INDEX = 0xE7037ED1A0B428DBull;
constexpr uint64_t L_VALUE = 0x8EBC6AF09C88C6E3ull;
constexpr uint64_t O_REG = 0x589965CC75374CC3ull;
constexpr uint64_t O_SIZE = 0x1D8E4E27C47D124Full;

inline uint64_t mix(uint64_t h, uint64_t v) { return ((h << 5) | (h >> 59)) ^ v; }

// The walk proper, over a constructed parser.
uint64_t walk_parser(const Parser &p) {
  uint64_t h = 0;
  for (auto &f : p.functions())
    h = mix(h, f.getFunctionAddress() * F_ADDR + f.getStackSize() * F_STACK +
                   f.getRecordCount() * F_COUNT);
  for (auto &c : p.constants())
    h = mix(h, c.getValue() * C_VALUE);
  for (auto &r : p.records()) {
    uint64_t v = r.getID() * R_ID + uint64_t(r.getInstructionOffset()) * R_OFFSET +
                 uint64_t(r.getNumLocations()) * R_NLOC +
                 uint64_t(r.getNumLiveOuts()) * R_NLIVE;
    for (auto &l : r.locations()) {
      Kind k = l.getKind();
      v += uint64_t(k) * L_KIND + uint64_t(l.getSizeInBytes()) * L_SIZE;
      switch (k) {
      case Kind::Register:
        v += uint64_t(l.getDwarfRegNum()) * L_REG;
        break;
      case Kind::Direct:
      case Kind::Indirect:
        v += uint64_t(l.getDwarfRegNum()) * L_REG +
             uint64_t(uint32_t(l.getOffset())) * L_OFFSET;
        break;
      case Kind::Constant:
        v += uint64_t(l.getSmallConstant()) * L_SMALL;
        break;
      case Kind::ConstantIndex: {
        uint32_t i = l.getConstantIndex();
        v += uint64_t(i) * L_INDEX + p.getConstant(i).getValue() * L_VALUE;
        break;
      }
      }
    }
    for (auto &o : r.liveouts())
      v += uint64_t(o.getDwarfRegNum()) * O_REG + uint64_t(o.getSizeInBytes()) * O_SIZE;
    h = mix(h, v);
  }
  return h;
}

uint64_t walk(const uint8_t *data, size_t len) {
  llvm::ArrayRef<uint8_t> section(data, len);
  if (llvm::Error e = Parser::validateHeader(section)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  Parser p(section);
  return walk_parser(p);
}

uint64_t now(int clock) {
  timespec ts{};
  clock_gettime(clockid_t(clock), &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

} // namespace

// Parses `data` (one little-endian version-3 table) with llvm::StackMapParser and walks
// every function, constant, record, location and live-out; returns the checksum (0 if
// LLVM rejects the header).
extern "C" uint64_t llvm_stackmap_walk(const uint8_t *data, size_t len) {
  return walk(data, len);
}

// Runs llvm_stackmap_walk `iters` times back to back and returns the elapsed time in
// nanoseconds on `clock` (a clock_gettime clock id: the bench passes CLOCK_MONOTONIC or
// CLOCK_THREAD_CPUTIME_ID, the same clock it times Locus with), so the timing loop itself
// stays on the C++ side. The last checksum goes to *checksum.
extern "C" uint64_t llvm_stackmap_walk_timed(const uint8_t *data, size_t len, uint64_t iters,
                                             int clock, uint64_t *checksum) {
  uint64_t h = 0;
  uint64_t start = now(clock);
  for (uint64_t i = 0; i < iters; ++i) {
    h = walk(data, len);
    asm volatile("" : : "r"(h) : "memory");
  }
  uint64_t end = now(clock);
  *checksum = h;
  return end - start;
}

// One llvm_stackmap_walk timed in two parts on `clock`: header validation plus
// StackMapParser construction (*construct_ns), then the walk (*walk_ns). Returns the
// checksum (0 if LLVM rejects the header).
extern "C" uint64_t llvm_stackmap_walk_split(const uint8_t *data, size_t len, int clock,
                                             uint64_t *construct_ns, uint64_t *walk_ns) {
  uint64_t start = now(clock);
  llvm::ArrayRef<uint8_t> section(data, len);
  if (llvm::Error e = Parser::validateHeader(section)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  Parser p(section);
  asm volatile("" : : "r"(&p) : "memory");
  uint64_t constructed = now(clock);
  uint64_t h = walk_parser(p);
  asm volatile("" : : "r"(h) : "memory");
  uint64_t end = now(clock);
  *construct_ns = constructed - start;
  *walk_ns = end - constructed;
  return h;
}
