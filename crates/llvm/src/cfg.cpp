// What the LLVM C API does not expose for editing control flow, called from
// src/builder/control.rs.

#include "llvm/IR/BasicBlock.h"
#include "llvm/IR/Instruction.h"
#include "llvm-c/Core.h"

extern "C" LLVMBasicBlockRef locus_llvm_split_block_before(LLVMValueRef inst) {
  auto *I = llvm::unwrap<llvm::Instruction>(inst);
  return llvm::wrap(I->getParent()->splitBasicBlock(I));
}
