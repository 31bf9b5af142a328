//! The raw helpers every other module shares: strings LLVM allocates for us ([`Message`]),
//! strings it lends us (`lossy`, `from_c_str`), and the two strings every value has (its
//! name and its printed form).
//!
//! Each function here takes a raw pointer whose validity only the caller can know, so each
//! is `unsafe` and says in a `# Safety` section what it needs.

use std::ffi::{c_char, CStr};

use llvm_sys::core::{LLVMDisposeMessage, LLVMGetValueName2, LLVMPrintValueToString};
use llvm_sys::prelude::LLVMValueRef;

/// A string LLVM allocated for us; freed with `LLVMDisposeMessage` on drop.
pub(crate) struct Message(*mut c_char);

impl Message {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is null, or a NUL-terminated string from an LLVM C API call documented to be
    /// released with `LLVMDisposeMessage`, not released elsewhere: the `Message` releases it.
    pub(crate) unsafe fn from_raw(raw: *mut c_char) -> Self {
        Message(raw)
    }

    /// The text, or `None` for a null pointer. Invalid UTF-8 is replaced.
    pub(crate) fn text(&self) -> Option<String> {
        // SAFETY: per `from_raw`'s contract, null or a NUL-terminated C string alive until
        // `self` drops.
        unsafe { from_c_str(self.0) }
    }

    /// The text, or `fallback` when LLVM gave none or an empty one.
    pub(crate) fn text_or(&self, fallback: &str) -> String {
        match self.text() {
            Some(text) if !text.trim().is_empty() => text,
            _ => fallback.to_owned(),
        }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from LLVM with this deallocation contract (see
            // `from_raw`) and is released exactly once.
            unsafe { LLVMDisposeMessage(self.0) };
        }
    }
}

/// Copies `len` bytes at `ptr` (null means empty), replacing invalid UTF-8.
///
/// # Safety
///
/// `ptr` is null, or valid for reads of `len` bytes for the duration of the call.
pub(crate) unsafe fn lossy(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: `ptr` is non-null and valid for `len` bytes (this function's contract).
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies the NUL-terminated string at `ptr`, replacing invalid UTF-8; `None` for null.
///
/// # Safety
///
/// `ptr` is null, or points to a NUL-terminated string that stays alive and unchanged for
/// the duration of the call.
pub(crate) unsafe fn from_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is non-null and NUL-terminated (this function's contract).
    let text = unsafe { CStr::from_ptr(ptr) };
    Some(text.to_string_lossy().into_owned())
}

/// The name LLVM stores for `raw` (empty when unnamed).
///
/// # Safety
///
/// `raw` is a live LLVM value.
pub(crate) unsafe fn value_name(raw: LLVMValueRef) -> String {
    let mut len = 0;
    // SAFETY: `raw` is a live value (this function's contract).
    let ptr = unsafe { LLVMGetValueName2(raw, &mut len) };
    // SAFETY: the name is valid for `len` bytes until the value is renamed, and is copied
    // at once.
    unsafe { lossy(ptr, len) }
}

/// `raw` as LLVM prints it (`%x = load ptr, ptr %p` for an instruction), without the
/// leading indentation.
///
/// # Safety
///
/// `raw` is a live LLVM value.
pub(crate) unsafe fn print_value(raw: LLVMValueRef) -> String {
    // SAFETY: `raw` is a live value (this function's contract).
    let text = unsafe { LLVMPrintValueToString(raw) };
    // SAFETY: the string is ours, to be released with `LLVMDisposeMessage`.
    let text = unsafe { Message::from_raw(text) };
    text.text().unwrap_or_default().trim().to_owned()
}

/// Converts an `LLVMBool` result.
pub(crate) fn flag(value: i32) -> bool {
    value != 0
}
