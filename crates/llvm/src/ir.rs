//! Walking IR: functions, blocks, instructions, operands, types.
