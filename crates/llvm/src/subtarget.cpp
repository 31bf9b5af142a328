// What the LLVM C API does not expose, called from src/codegen.rs; the crate's only C++.
//
// Checks a CPU name and a feature string against one target's subtarget tables. Without
// this check an unknown CPU is only a warning on stderr, and for x86-64 it is then a fatal
// error ("64-bit code requested on a subtarget that doesn't support it!") that aborts the
// process. Touches nothing but read-only target tables.
//
// Sets one boolean option, -enable-patchpoint-liveness, directly: LLVMParseCommandLineOptions
// could set it only once per process (a second occurrence is an error that exits).

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

// A copy the Rust side frees with LLVMDisposeMessage (which is free()).
char *message_copy(const std::string &text) { return strdup(text.c_str()); }

bool is_feature(const llvm::MCSubtargetInfo &info, llvm::StringRef name) {
  for (const llvm::SubtargetFeatureKV &feature : info.getAllProcessorFeatures()) {
    if (name == feature.Key) {
      return true;
    }
  }
  return false;
}

} // namespace

// Returns 0 when `cpu` (empty allowed) is a processor of the target for `triple` and every
// comma-separated entry of `features` is `+name` or `-name` with a feature of that target.
// Otherwise returns 1 and stores a malloc'd explanation in `*message`.
extern "C" int locus_llvm_check_subtarget(const char *triple, const char *cpu,
                                          const char *features, char **message) {
  *message = nullptr;
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr) {
    *message = message_copy(error);
    return 1;
  }
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  if (!info) {
    *message = message_copy("the target has no subtarget information");
    return 1;
  }
  llvm::StringRef cpu_name(cpu);
  if (!cpu_name.empty() && !info->isCPUStringValid(cpu_name)) {
    *message = message_copy("'" + cpu_name.str() + "' is not a processor of this target");
    return 1;
  }
  llvm::SmallVector<llvm::StringRef, 16> entries;
  llvm::StringRef(features).split(entries, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : entries) {
    if (!entry.starts_with("+") && !entry.starts_with("-")) {
      *message = message_copy("feature '" + entry.str() + "' does not start with '+' or '-'");
      return 1;
    }
    if (!is_feature(*info, entry.drop_front())) {
      *message = message_copy("'" + entry.drop_front().str() +
                              "' is not a feature of this target");
      return 1;
    }
  }
  return 0;
}

// Sets LLVM's -enable-patchpoint-liveness (a cl::opt<bool> of StackMapLivenessAnalysis.cpp
// in LLVM 19) to `on`. Returns 0, or 1 when no option has that name. The caller keeps every
// compilation from running meanwhile: options are globals that code generation reads.
extern "C" int locus_llvm_set_patchpoint_liveness(int on) {
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  auto found = options.find("enable-patchpoint-liveness");
  if (found == options.end()) {
    return 1;
  }
  static_cast<llvm::cl::opt<bool> *>(found->second)->setValue(on != 0);
  return 0;
}
