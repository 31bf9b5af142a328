; The GC chapter's sample: a list of 10..1 built across allocations, then summed while
; allocating garbage; once the sum passes 20 each step reads the head's value instead, so
; the value is read through a select of pointers derived from two objects, which needs a
; parallel select of their bases. Result: 10 + 9 + 8 + 7 * 10 = 97.
declare ptr @julia.get_pgcstack()
declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)

; cons(value, next): a node [next: tracked][value: i64].
define ptr addrspace(10) @cons(i64 %v, ptr addrspace(10) %next) {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  %n = call ptr addrspace(10) @locus_gc_alloc(i64 1, i64 8)
  %n.d = addrspacecast ptr addrspace(10) %n to ptr addrspace(11)
  store ptr addrspace(10) %next, ptr addrspace(11) %n.d
  %vp = getelementptr i8, ptr addrspace(11) %n.d, i64 8
  store i64 %v, ptr addrspace(11) %vp
  ret ptr addrspace(10) %n
}

define i64 @main() {
entry:
  %pgcstack = call ptr @julia.get_pgcstack()
  br label %build

build:
  %i = phi i64 [ 1, %entry ], [ %i.next, %build ]
  %list = phi ptr addrspace(10) [ null, %entry ], [ %node, %build ]
  %node = call ptr addrspace(10) @cons(i64 %i, ptr addrspace(10) %list)
  %i.next = add i64 %i, 1
  %built = icmp eq i64 %i, 10
  br i1 %built, label %walk, label %build

walk:
  %cur = phi ptr addrspace(10) [ %node, %build ], [ %next, %body ]
  %sum = phi i64 [ 0, %build ], [ %sum.next, %body ]
  %end = icmp eq ptr addrspace(10) %cur, null
  br i1 %end, label %done, label %body

body:
  %cur.d = addrspacecast ptr addrspace(10) %cur to ptr addrspace(11)
  %vp = getelementptr i8, ptr addrspace(11) %cur.d, i64 8
  %big = icmp ugt i64 %sum, 20
  ; Once the sum passes 20, read the head's value instead: a select of pointers derived
  ; from two different objects.
  %head.d = addrspacecast ptr addrspace(10) %node to ptr addrspace(11)
  %alt = getelementptr i8, ptr addrspace(11) %head.d, i64 8
  %which = select i1 %big, ptr addrspace(11) %alt, ptr addrspace(11) %vp
  %garbage = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 24)
  %v = load i64, ptr addrspace(11) %which
  %sum.next = add i64 %sum, %v
  %next = load ptr addrspace(10), ptr addrspace(11) %cur.d
  br label %walk

done:
  ret i64 %sum
}
