//! Changing IR: inserting, replacing and erasing instructions.
