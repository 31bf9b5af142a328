; The stack map chapter's sample: one of each intrinsic that writes .llvm_stackmaps.
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare token @llvm.experimental.gc.statepoint.p0(i64, i32, ptr, i32, i32, ...)
declare ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token, i32, i32)
declare void @runtime_poll()
declare i64 @lookup_slow(ptr)

; A safepoint after a call: %count and %limit must survive the call, the alloca is
; recorded as its address, and two constants ride along (one too large for 32 bits).
define i64 @loop_head(i64 %count, i64 %limit) {
entry:
  %frame = alloca [4 x i64]
  call void @runtime_poll()
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 1, i32 16, i64 %count, i64 %limit, ptr %frame, i64 -1, i64 81985529216486895)
  %r = add i64 %count, %limit
  ret i64 %r
}

; An inline cache: 20 patchable bytes that call @lookup_slow until the runtime patches
; them. anyregcc lets the register allocator pick the argument and result registers,
; which the record then names.
define i64 @property_get(ptr %object) {
entry:
  %v = call anyregcc i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 20, ptr @lookup_slow, i32 1, ptr %object)
  ret i64 %v
}

; A GC safepoint: the collector may move %obj during the call; the record gives the
; deopt state and where %obj lives so the collector can update it.
define ptr addrspace(1) @allocate_pair(ptr addrspace(1) %obj, i64 %pc) gc "statepoint-example" {
entry:
  %tok = call token (i64, i32, ptr, i32, i32, ...) @llvm.experimental.gc.statepoint.p0(i64 3, i32 0, ptr elementtype(void ()) @runtime_poll, i32 0, i32 0, i32 0, i32 0) [ "deopt"(i64 %pc, i64 7), "gc-live"(ptr addrspace(1) %obj) ]
  %moved = call ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token %tok, i32 0, i32 0)
  ret ptr addrspace(1) %moved
}
