//! Late GC root placement: from IR with tracked pointers to IR with a GC frame.
