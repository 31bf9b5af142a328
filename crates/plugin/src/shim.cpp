// The C++ half of liblocus_plugin.so: what LLVM's new pass manager needs to see (pass
// classes, PassBuilder callbacks, diagnostics), with the work done in Rust
// (`locus_plugin_run`, src/lib.rs) on the module LLVM hands over as an LLVMModuleRef.
//
// Pass names (parsed at module level, and inside function(...) at function level):
//   locus-gc-verify                          the GC invariants (spec 003); each GC pass
//                                            also as NAME<strict> (every rule as written)
//   locus-late-gc-lowering, LateLowerGCFrame roots placed, Julia's intermediate form
//   locus-final-gc-lowering, FinalLowerGC    roots placed and the frame made real
//   locus-sme-check                          the SME rules (spec 004); mode changes
//                                            as remarks (-pass-remarks=locus-sme)
// In a default pipeline (clang -fpass-plugin, opt -passes='default<O2>'), a module pass at
// its start lowers a GC module and one at its end checks SME code (see src/lib.rs).
//
// Errors never crash the host: a finding is a diagnostic of severity error through the
// context's handler (opt prints it and exits with status 1; clang reports it and fails the
// compilation). A pass that cannot finish (the GC lowering refused the IR, or an internal
// error in Locus, caught on the Rust side) reports why the same way, and leaves the
// functions it may have half-changed with an `unreachable` body (see runLocus).

#include <optional>
#include <string>

#include "llvm-c/Types.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

// Keep in step with `Pass` in src/lib.rs.
enum PassKind : int {
  GcVerify = 0,
  LateLowering = 1,
  FinalLowering = 2,
  SmeCheck = 3,
  // Default pipelines: the GC lowering at their start, the SME check at their end.
  AutoGc = 4,
  AutoSme = 6,
  // FinalLowering on a module Locus's late lowering went through (see kLateMarker).
  FinalAfterLate = 5,
};

// Named metadata with no operands (so no metadata node is numbered differently) that the
// late lowering leaves on the module: the final lowering then does not hold the functions
// to the GC invariants, which the late lowering's rewrites break by design (a
// julia.pointer_from_objref made a cast, julia.gc_alloc_obj made julia.gc_alloc_bytes with
// the type tag as an integer) and which were checked before it. A module-level final
// lowering removes it.
const char *const kLateMarker = "locus.gc.late";

// Keep in step with `Kind` and the status constants in src/lib.rs.
enum FindingKind : int { KindError = 0, KindWarning = 1, KindRemark = 2, KindNote = 3 };
enum Status : int { Unchanged = 0, Changed = 1, Findings = 2, Failed = 3 };

} // namespace

extern "C" {
/// Called by Rust once per finding. `function` and `instruction` may be empty: the
/// instruction is the text LLVM prints for it, found again here to attach its location.
typedef void (*locus_emit_fn)(void *sink, int kind, const char *function,
                              size_t function_len, const char *instruction,
                              size_t instruction_len, const char *message,
                              size_t message_len);

/// Runs pass `pass` (PassKind) on `module`, on the whole module (`per_function` 0) or on
/// the function named `function` (1). Returns a Status. Defined in src/lib.rs.
int locus_plugin_run(int pass, LLVMModuleRef module, int per_function,
                     const char *function, size_t function_len, locus_emit_fn emit,
                     void *sink);

/// Fills LLVM's plugin description; src/lib.rs's llvmGetPassPluginInfo returns it (the
/// symbol LLVM looks up must be exported by the Rust cdylib, which exports only its own).
void locus_plugin_info(PassPluginLibraryInfo *out);
}

namespace {

const char *passName(int Kind) {
  switch (Kind) {
  case GcVerify:
    return "locus-gc-verify";
  case LateLowering:
    return "locus-late-gc-lowering";
  case FinalLowering:
    return "locus-final-gc-lowering";
  case SmeCheck:
    return "locus-sme-check";
  default:
    return "locus";
  }
}

// Added to a GC pass's number by the `<strict>` parameter (`locus-gc-verify<strict>`): the
// invariants as spec 003 writes them, as `locus gc verify --strict`.
const int kStrict = 0x100;

std::optional<int> parseName(StringRef Name) {
  if (Name.consume_back("<strict>")) {
    auto Kind = parseName(Name);
    if (Kind && (*Kind == GcVerify || *Kind == LateLowering || *Kind == FinalLowering))
      return *Kind | kStrict;
    return std::nullopt;
  }
  if (Name == "locus-gc-verify")
    return GcVerify;
  if (Name == "locus-late-gc-lowering" || Name == "LateLowerGCFrame")
    return LateLowering;
  if (Name == "locus-final-gc-lowering" || Name == "FinalLowerGC")
    return FinalLowering;
  if (Name == "locus-sme-check")
    return SmeCheck;
  return std::nullopt;
}

// LLVM hands out plugin diagnostic kinds one at a time; this plugin takes one, once.
int diagnosticKind() {
  static const int Kind = getNextAvailablePluginDiagnosticKind();
  return Kind;
}

// An error or warning of Locus's, printed as its text (opt: "error: TEXT").
class LocusDiagnostic : public DiagnosticInfo {
  const std::string &Text;

public:
  LocusDiagnostic(DiagnosticSeverity Severity, const std::string &Text)
      : DiagnosticInfo(diagnosticKind(), Severity), Text(Text) {}
  void print(DiagnosticPrinter &DP) const override { DP << Text; }
};

// What the Rust side reports into, for one pass run.
struct Sink {
  Module &M;
  const char *Pass;
  unsigned Errors = 0;
};

std::string printed(const Instruction &I) {
  std::string Text;
  raw_string_ostream OS(Text);
  I.print(OS);
  OS.flush();
  return StringRef(Text).trim().str();
}

// The instruction of `F` that prints as `Text` (how Locus names instructions).
const Instruction *findInstruction(const Function &F, StringRef Text) {
  StringRef Wanted = Text.trim();
  for (const Instruction &I : instructions(F))
    if (printed(I) == Wanted)
      return &I;
  return nullptr;
}

// "file:line:column: " of the instruction's debug location, if it has one.
std::string locationPrefix(const Instruction *I) {
  if (!I)
    return "";
  const DebugLoc &DL = I->getDebugLoc();
  if (!DL)
    return "";
  std::string Text;
  raw_string_ostream OS(Text);
  if (auto *Scope = dyn_cast_or_null<DIScope>(DL.getScope()))
    OS << Scope->getFilename();
  OS << ":" << DL.getLine() << ":" << DL.getCol() << ": ";
  OS.flush();
  return Text;
}

void emitFinding(void *SinkPtr, int Kind, const char *Function, size_t FunctionLen,
                 const char *Instruction, size_t InstructionLen, const char *Message,
                 size_t MessageLen) {
  if (!SinkPtr)
    return;
  Sink &S = *static_cast<Sink *>(SinkPtr);
  StringRef FnName(Function ? Function : "", Function ? FunctionLen : 0);
  StringRef InstText(Instruction ? Instruction : "", Instruction ? InstructionLen : 0);
  StringRef Msg(Message ? Message : "", Message ? MessageLen : 0);
  llvm::Function *F = FnName.empty() ? nullptr : S.M.getFunction(FnName);
  const llvm::Instruction *I =
      (F && !F->isDeclaration() && !InstText.empty()) ? findInstruction(*F, InstText) : nullptr;
  LLVMContext &Ctx = S.M.getContext();
  if (Kind == KindRemark) {
    // -pass-remarks=locus-sme (opt), -Rpass=locus-sme (clang) show these.
    if (I) {
      OptimizationRemark R("locus-sme", "ModeChange", I);
      R << Msg;
      Ctx.diagnose(R);
    } else if (F && !F->isDeclaration()) {
      OptimizationRemark R("locus-sme", "FunctionModeChange", F);
      R << Msg;
      Ctx.diagnose(R);
    }
    return;
  }
  DiagnosticSeverity Severity = Kind == KindError     ? DS_Error
                                : Kind == KindWarning ? DS_Warning
                                                      : DS_Note;
  if (Severity == DS_Error)
    ++S.Errors;
  std::string Text = locationPrefix(I) + S.Pass + ": " + Msg.str();
  LocusDiagnostic D(Severity, Text);
  Ctx.diagnose(D);
}

// Gives `F` the body `unreachable`: valid IR that every later pass and code generation
// handle, in place of a body a failed lowering may have left half-changed.
void neutralize(Function &F) {
  F.deleteBody();
  BasicBlock *BB = BasicBlock::Create(F.getContext(), "locus.failed", &F);
  new UnreachableInst(F.getContext(), BB);
}

// Runs one pass; returns whether the module changed. When a pass fails, its errors were
// reported through the context: a host whose handler ends the process there (opt) is
// gone; one that goes on to fail the compilation at its end (clang) gets functions whose
// bodies are `unreachable`, so that nothing after this pass works on a half-lowered
// module. A failure with no error reported (it should not happen) is a fatal error.
bool runLocus(int KindAndFlags, Module &M, Function *F) {
  int Kind = KindAndFlags & ~kStrict;
  int Flags = KindAndFlags & kStrict;
  Sink S{M, passName(Kind)};
  StringRef Name = F ? F->getName() : StringRef();
  NamedMDNode *Marker = M.getNamedMetadata(kLateMarker);
  int Run = ((Kind == FinalLowering && Marker) ? FinalAfterLate : Kind) | Flags;
  int Result = locus_plugin_run(Run, wrap(&M), F ? 1 : 0, Name.data(), Name.size(),
                                emitFinding, &S);
  if (Result != Failed) {
    if (Kind == LateLowering)
      M.getOrInsertNamedMetadata(kLateMarker);
    else if (Kind == FinalLowering && !F && Marker)
      Marker->eraseFromParent();
    return Result == Changed;
  }
  if (S.Errors == 0)
    report_fatal_error(Twine(S.Pass) + " failed on module '" + M.getModuleIdentifier() +
                           "' without saying why",
                       /*gen_crash_diag=*/false);
  if (F) {
    neutralize(*F);
  } else {
    for (Function &G : M)
      if (!G.isDeclaration())
        neutralize(G);
  }
  return true;
}

struct LocusModulePass : PassInfoMixin<LocusModulePass> {
  int Kind;
  explicit LocusModulePass(int Kind) : Kind(Kind) {}
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    return runLocus(Kind, M, nullptr) ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  // Lowering is needed for correctness, also in optnone functions.
  static bool isRequired() { return true; }
};

struct LocusFunctionPass : PassInfoMixin<LocusFunctionPass> {
  int Kind;
  explicit LocusFunctionPass(int Kind) : Kind(Kind) {}
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &) {
    if (F.isDeclaration())
      return PreservedAnalyses::all();
    return runLocus(Kind, *F.getParent(), &F) ? PreservedAnalyses::none()
                                              : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

void registerCallbacks(PassBuilder &PB) {
  PB.registerPipelineParsingCallback(
      [](StringRef Name, ModulePassManager &MPM, ArrayRef<PassBuilder::PipelineElement>) {
        if (auto Kind = parseName(Name)) {
          MPM.addPass(LocusModulePass(*Kind));
          return true;
        }
        return false;
      });
  PB.registerPipelineParsingCallback(
      [](StringRef Name, FunctionPassManager &FPM, ArrayRef<PassBuilder::PipelineElement>) {
        if (auto Kind = parseName(Name)) {
          FPM.addPass(LocusFunctionPass(*Kind));
          return true;
        }
        return false;
      });
  // Default pipelines (clang -fpass-plugin): GC roots placed before the optimizer runs
  // (which may turn a tracked pointer into an integer where the data layout does not make
  // address spaces 10-13 non-integral, as Julia's does), and the SME rules checked on the
  // module as it will be compiled.
  PB.registerPipelineStartEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(LocusModulePass(AutoGc)); });
  PB.registerOptimizerLastEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(LocusModulePass(AutoSme)); });
}

} // namespace

extern "C" void locus_plugin_info(PassPluginLibraryInfo *out) {
  if (!out)
    return;
  *out = {LLVM_PLUGIN_API_VERSION, "locus", "0.1.0", registerCallbacks};
}
