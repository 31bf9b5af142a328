//! Mark-sweep collection from the roots in the frame chain, with a stress mode.
