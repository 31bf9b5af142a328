; The tour's JIT sample: property reads through patch points (inline caches) and a
; function with stack maps after runtime calls (deoptimization points).
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare i64 @locus_ic_miss(ptr, i64)
declare i64 @locus_poll(i64)

; get(o, 10) + get(o, 20), each read a patch point of 48 bytes aimed at the miss handler
; (room for the inline fast path the runtime writes into the site).
define i64 @sum(ptr %o) {
  %x = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 1, i32 48, ptr @locus_ic_miss, i32 2, ptr %o, i64 10)
  %y = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 48, ptr @locus_ic_miss, i32 2, ptr %o, i64 20)
  %s = add i64 %x, %y
  ret i64 %s
}

; (a * 3 + b) * (a + 11) with a runtime call in between; the stack map records what is
; live after it, in an 8-byte shadow the runtime can overwrite with a call to its deopt
; entry.
define i64 @compute(i64 %a, i64 %b) {
  %slot = alloca i64, align 8
  store i64 %b, ptr %slot
  %t = mul i64 %a, 3
  %u = add i64 %a, 11
  %p = call i64 @locus_poll(i64 %t)
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 100, i32 8, ptr %slot, i64 %p, i64 %u, i64 42)
  %l = load i64, ptr %slot
  %v = add i64 %p, %l
  %r = mul i64 %v, %u
  ret i64 %r
}
