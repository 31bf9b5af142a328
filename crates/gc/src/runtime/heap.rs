//! The allocator: objects with tracked pointer fields and raw bytes.
