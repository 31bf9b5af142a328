// LLVM's two ways of ending the process, made to end it with one `locus:` line and exit
// status 1: report_fatal_error (LLVM's default prints "LLVM ERROR: ..." and exits 1) and
// report_bad_alloc_error (its default prints "LLVM ERROR: out of memory" and aborts), which
// a damaged bitcode file reaches when the reader allocates whatever size a record claims.
// Called from src/fatal.rs. The handlers only write(2) and _exit: they may run with LLVM's
// heap exhausted or inconsistent.

#include "llvm/Support/ErrorHandling.h"

#include <cstring>
#include <unistd.h>

namespace {

void write_all(const char *text) {
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t n = write(2, text, left);
    if (n <= 0) {
      return;
    }
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void on_fatal_error(void *, const char *reason, bool) {
  write_all("locus: LLVM: ");
  write_all(reason);
  write_all("\n");
  _exit(1);
}

void on_bad_alloc(void *, const char *reason, bool) {
  write_all("locus: LLVM ran out of memory (");
  write_all(reason);
  write_all("): an input claims more than can be allocated (a damaged file?)\n");
  _exit(1);
}

} // namespace

extern "C" void locus_llvm_install_fatal_handlers() {
  llvm::remove_fatal_error_handler();
  llvm::install_fatal_error_handler(on_fatal_error, nullptr);
  llvm::remove_bad_alloc_error_handler();
  llvm::install_bad_alloc_error_handler(on_bad_alloc, nullptr);
}
